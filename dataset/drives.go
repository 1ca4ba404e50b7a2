package dataset

import "fmt"

// SplitDrives spreads frames over drives (the first frames%drives get one
// more) named <world>_drive_%04d_sync, with splits from AssignSplits and
// seeds from DriveSeed(seed, d).
func SplitDrives(world string, seed int64, frames, drives, stride int) ([]Drive, error) {
	if frames < 1 || drives < 1 || drives > frames {
		return nil, fmt.Errorf("%d frames over %d drives: want 1 <= drives <= frames", frames, drives)
	}
	splits := AssignSplits(drives)
	out := make([]Drive, drives)
	for d := range out {
		count := frames / drives
		if d < frames%drives {
			count++
		}
		out[d] = Drive{Name: fmt.Sprintf("%s_drive_%04d_sync", world, d), Seed: DriveSeed(seed, d),
			Split: splits[d], Count: count, Stride: stride}
	}
	return out, nil
}
