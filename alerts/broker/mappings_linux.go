package broker

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// releaseMappings unmaps every mapping of f's file in this process
// (/proc/self/maps: the ranges whose device and inode are f's). It is
// for a bbolt.DB that panicked inside Open: nothing references its
// mapping any more and bbolt never unmaps it. A mapping that cannot be
// found or removed stays (address space only, not memory in use).
func releaseMappings(f *os.File) {
	st, err := f.Stat()
	if err != nil {
		return
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return
	}
	for _, r := range mappingsOf(uint64(sys.Dev), sys.Ino) {
		unix.Syscall(unix.SYS_MUNMAP, r[0], r[1]-r[0], 0)
	}
}

// mappingsOf lists the [start, end) address ranges of /proc/self/maps
// that map the file of device dev and inode ino.
func mappingsOf(dev, ino uint64) [][2]uintptr {
	data, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return nil
	}
	want := fmt.Sprintf("%02x:%02x", unix.Major(dev), unix.Minor(dev))
	var out [][2]uintptr
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		// start-end perms offset dev inode path
		f := bytes.Fields(sc.Bytes())
		if len(f) < 5 || string(f[3]) != want {
			continue
		}
		if n, err := strconv.ParseUint(string(f[4]), 10, 64); err != nil || n != ino {
			continue
		}
		se := bytes.SplitN(f[0], []byte("-"), 2)
		if len(se) != 2 {
			continue
		}
		a, err1 := strconv.ParseUint(string(se[0]), 16, 64)
		b, err2 := strconv.ParseUint(string(se[1]), 16, 64)
		if err1 == nil && err2 == nil && b > a {
			out = append(out, [2]uintptr{uintptr(a), uintptr(b)})
		}
	}
	return out
}
