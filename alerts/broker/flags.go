package broker

import (
	"errors"
	"flag"
	"fmt"
	"strings"
)

// StandaloneFlags are the flags of `didoedge broker`, the embedded broker
// run on its own.
type StandaloneFlags struct {
	Config, Listen, User, PasswordFile, PasswordEnv, Read, Write, Store string
	AllowAnonymous                                                      bool
}

// AddFlags declares the flags on fs.
func (f *StandaloneFlags) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.Config, "config", "", "alerts config file whose `embedded` section to use")
	fs.StringVar(&f.Listen, "listen", "", "host:port to listen on (default: the config's, else "+DefaultListen+")")
	fs.StringVar(&f.User, "user", "", "username of the one account (instead of -config)")
	fs.StringVar(&f.PasswordFile, "password-file", "", "file holding the account's password")
	fs.StringVar(&f.PasswordEnv, "password-env", "", "environment variable holding the account's password")
	fs.BoolVar(&f.AllowAnonymous, "allow-anonymous", false, "let clients without credentials connect (they may read the topic prefix, never publish)")
	fs.StringVar(&f.Read, "read", "didoedge/#", "comma-separated topic filters the -user account may subscribe to")
	fs.StringVar(&f.Write, "write", "didoedge/#", "comma-separated topic filters the -user account may publish on")
	fs.StringVar(&f.Store, "store", "", "directory of the persistent store (sessions, queued and retained messages survive a restart); default: the config's embedded.store.dir, else memory only")
}

// Apply lays the flags over c (the -config file's embedded section, else
// Config{Listen: DefaultListen}): -allow-anonymous, the -user account,
// -listen and -store; the store's settings are then defaulted and
// checked. Errors name the flag.
func (f *StandaloneFlags) Apply(c *Config) error {
	c.AllowAnonymous = c.AllowAnonymous || f.AllowAnonymous
	if f.User != "" {
		if (f.PasswordFile == "") == (f.PasswordEnv == "") {
			return errors.New("-user needs exactly one of -password-file or -password-env")
		}
		u := UserConfig{Username: f.User, PasswordFile: f.PasswordFile, PasswordEnv: f.PasswordEnv}
		for _, l := range []struct {
			flag, list string
			dst        *[]string
		}{{"-read", f.Read, &u.Read}, {"-write", f.Write, &u.Write}} {
			for _, filter := range strings.Split(l.list, ",") {
				if filter = strings.TrimSpace(filter); filter == "" {
					continue
				}
				if err := CheckFilter(filter); err != nil {
					return fmt.Errorf("%s %q: %w", l.flag, filter, err)
				}
				*l.dst = append(*l.dst, filter)
			}
		}
		c.Users = append(c.Users, u)
	}
	if f.Listen != "" {
		if err := CheckAddress(f.Listen); err != nil {
			return fmt.Errorf("-listen: %w", err)
		}
		c.Listen = f.Listen
	}
	if f.Store != "" {
		c.Store.Dir = f.Store
	}
	c.Store.SetDefaults()
	return c.Store.Validate("embedded.store")
}

// Describe is the line `didoedge broker` prints once b, started with
// opts, listens.
func (b *Broker) Describe(opts Options) string {
	addrs := b.Addr()
	if t := b.TLSAddr(); t != "" {
		addrs = strings.TrimPrefix(addrs+", TLS "+t, ", ")
	}
	persist := "memory only"
	if opts.Store.Dir != "" {
		persist = "store " + opts.Store.Dir
	}
	return fmt.Sprintf("embedded MQTT broker listening on %s (%d users, anonymous %v, %s)", addrs, len(opts.Users), opts.AllowAnonymous, persist)
}
