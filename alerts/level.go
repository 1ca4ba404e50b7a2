package alerts

import "fmt"

// Level is a zone's alert level.
type Level int

// Levels in increasing severity.
const (
	LevelOK Level = iota
	LevelWarn
	LevelCritical
)

var levelNames = [...]string{"ok", "warn", "critical"}

func (l Level) String() string {
	if l < 0 || int(l) >= len(levelNames) {
		return fmt.Sprintf("Level(%d)", int(l))
	}
	return levelNames[l]
}

// MarshalText writes the level's name.
func (l Level) MarshalText() ([]byte, error) {
	if l < 0 || int(l) >= len(levelNames) {
		return nil, fmt.Errorf("invalid level %d", int(l))
	}
	return []byte(levelNames[l]), nil
}

// UnmarshalText reads a level's name.
func (l *Level) UnmarshalText(b []byte) error {
	for i, n := range levelNames {
		if string(b) == n {
			*l = Level(i)
			return nil
		}
	}
	return fmt.Errorf("unknown level %q", b)
}

// step applies one criterion's hysteresis: cur is the criterion's level in
// the previous frame. A level is entered when v crosses its enter threshold
// and kept until v crosses back over its exit threshold.
func (c *Criterion) step(v float64, cur Level, higherWorse bool) Level {
	beyond := func(t float64) bool {
		if higherWorse {
			return v >= t
		}
		return v <= t
	}
	holds := func(t float64) bool {
		if higherWorse {
			return v > t
		}
		return v < t
	}
	switch {
	case beyond(c.Critical.Enter) || (cur == LevelCritical && holds(c.Critical.Exit)):
		return LevelCritical
	case beyond(c.Warn.Enter) || (cur >= LevelWarn && holds(c.Warn.Exit)):
		return LevelWarn
	}
	return LevelOK
}
