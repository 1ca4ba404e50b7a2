package broker

import (
	"errors"
	"strings"
)

// CheckFilter validates an MQTT topic filter of a grant: not empty, no
// NUL, '+' and '#' only as whole levels, '#' only as the last one.
func CheckFilter(f string) error {
	if f == "" {
		return errors.New("empty topic filter")
	}
	if strings.ContainsRune(f, 0) {
		return errors.New("NUL in topic filter")
	}
	levels := strings.Split(f, "/")
	for i, l := range levels {
		if strings.ContainsAny(l, "+#") && len(l) > 1 {
			return errors.New("'+' and '#' must fill a whole level")
		}
		if l == "#" && i != len(levels)-1 {
			return errors.New("'#' must be the last level")
		}
	}
	return nil
}

// covers reports whether the grant filter covers every topic that filter
// (a subscription filter, or a topic) matches. Topics starting with '$'
// are covered only by a grant whose first level names them: a leading
// wildcard never matches them (MQTT 3.1.1, 4.7.2).
func covers(grant, filter string) bool {
	g, f := strings.Split(grant, "/"), strings.Split(filter, "/")
	dollar := strings.HasPrefix(filter, "$")
	for i, gl := range g {
		if gl == "#" {
			return !(i == 0 && dollar)
		}
		if i >= len(f) {
			return false
		}
		switch fl := f[i]; {
		case gl == "+":
			if (i == 0 && dollar) || fl == "#" {
				return false
			}
		case gl != fl:
			return false
		}
	}
	return len(g) == len(f)
}

func coveredByAny(grants []string, filter string) bool {
	for _, g := range grants {
		if covers(g, filter) {
			return true
		}
	}
	return false
}

// matchesAny reports whether a topic name (no wildcards) is granted.
func matchesAny(grants []string, topic string) bool {
	if topic == "" || strings.ContainsAny(topic, "+#") {
		return false
	}
	return coveredByAny(grants, topic)
}

// shareless strips the "$share/<group>/" prefix of a shared subscription.
func shareless(filter string) string {
	if rest, ok := strings.CutPrefix(filter, "$share/"); ok {
		if _, f, ok := strings.Cut(rest, "/"); ok {
			return f
		}
	}
	return filter
}
