package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/didoedge/didoedge/alerts/broker"
	"github.com/didoedge/didoedge/alerts/mqttpub"
	"github.com/didoedge/didoedge/runtime/runconfig"
)

// runBroker runs the embedded MQTT broker standalone until interrupted.
func runBroker(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "broker")
	config := fs.String("config", "", "alerts config file whose `embedded` section to use")
	listen := fs.String("listen", "", "host:port to listen on (default: the config's, else "+broker.DefaultListen+")")
	user := fs.String("user", "", "username of the one account (instead of -config)")
	passFile := fs.String("password-file", "", "file holding the account's password")
	passEnv := fs.String("password-env", "", "environment variable holding the account's password")
	anonymous := fs.Bool("allow-anonymous", false, "let clients without credentials connect (they may read the topic prefix, never publish)")
	read := fs.String("read", "didoedge/#", "comma-separated topic filters the -user account may subscribe to")
	write := fs.String("write", "didoedge/#", "comma-separated topic filters the -user account may publish on")
	store := fs.String("store", "", "directory of the persistent store (sessions, queued and retained messages survive a restart); default: the config's embedded.store.dir, else memory only")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	emb := broker.Config{Listen: broker.DefaultListen, AllowAnonymous: *anonymous}
	prefix := "didoedge"
	if *config != "" {
		cfg, err := runconfig.LoadAlerts(*config)
		if err != nil {
			return err
		}
		emb, prefix = cfg.Embedded, cfg.TopicPrefix
		emb.AllowAnonymous = emb.AllowAnonymous || *anonymous
	}
	if *user != "" {
		if (*passFile == "") == (*passEnv == "") {
			return errors.New("-user needs exactly one of -password-file or -password-env")
		}
		u := broker.UserConfig{Username: *user, PasswordFile: *passFile, PasswordEnv: *passEnv}
		for _, f := range []struct {
			flag, list string
			dst        *[]string
		}{{"-read", *read, &u.Read}, {"-write", *write, &u.Write}} {
			for _, filter := range strings.Split(f.list, ",") {
				if filter = strings.TrimSpace(filter); filter == "" {
					continue
				}
				if err := broker.CheckFilter(filter); err != nil {
					return fmt.Errorf("%s %q: %w", f.flag, filter, err)
				}
				*f.dst = append(*f.dst, filter)
			}
		}
		emb.Users = append(emb.Users, u)
	}
	if *listen != "" {
		if err := broker.CheckAddress(*listen); err != nil {
			return fmt.Errorf("-listen: %w", err)
		}
		emb.Listen = *listen
	}
	if *store != "" {
		emb.Store.Dir = *store
	}
	emb.Store.SetDefaults()
	if err := emb.Store.Validate("embedded.store"); err != nil {
		return err
	}
	opts, err := mqttpub.BrokerOptions(emb, prefix, env.log)
	if err != nil {
		return err
	}
	b, err := broker.Start(ctx, opts)
	if err != nil {
		return err
	}
	addrs := b.Addr()
	if t := b.TLSAddr(); t != "" {
		addrs = strings.TrimPrefix(addrs+", TLS "+t, ", ")
	}
	persist := "memory only"
	if opts.Store.Dir != "" {
		persist = "store " + opts.Store.Dir
	}
	fmt.Fprintf(env.stdout, "embedded MQTT broker listening on %s (%d users, anonymous %v, %s)\n", addrs, len(opts.Users), opts.AllowAnonymous, persist)
	<-ctx.Done()
	return b.Close()
}
