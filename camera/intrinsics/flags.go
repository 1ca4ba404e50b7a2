package intrinsics

import (
	"errors"
	"flag"
	"fmt"
)

// Flags are a command's --intrinsics (a list) and --intrinsics-file, which
// exclude each other.
type Flags struct {
	List, File string
}

// AddFlags declares --intrinsics and --intrinsics-file on fs with the
// command's help texts.
func (f *Flags) AddFlags(fs *flag.FlagSet, listUsage, fileUsage string) {
	fs.StringVar(&f.List, "intrinsics", "", listUsage)
	fs.StringVar(&f.File, "intrinsics-file", "", fileUsage)
}

// Intrinsics reads the flag given (ParseList or ReadFile); nil when
// neither is given.
func (f *Flags) Intrinsics() (*Intrinsics, error) {
	switch {
	case f.List != "" && f.File != "":
		return nil, errors.New("--intrinsics and --intrinsics-file are exclusive")
	case f.List != "":
		in, err := ParseList(f.List)
		if err != nil {
			return nil, fmt.Errorf("flag -intrinsics: %w", err)
		}
		return &in, nil
	case f.File != "":
		in, err := ReadFile(f.File)
		if err != nil {
			return nil, fmt.Errorf("flag -intrinsics-file: %w", err)
		}
		return &in, nil
	}
	return nil, nil
}
