package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/didoedge/didoedge/alerts"
	"github.com/didoedge/didoedge/alerts/broker"
	"github.com/didoedge/didoedge/alerts/mqttpub"
)

// runBroker runs the embedded MQTT broker standalone until interrupted.
func runBroker(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "broker")
	config := fs.String("config", "", "alerts config file whose `embedded` section to use")
	listen := fs.String("listen", "", "host:port to listen on (default: the config's, else "+broker.DefaultListen+")")
	user := fs.String("user", "", "username of the one account (instead of -config)")
	passFile := fs.String("password-file", "", "file holding the account's password")
	passEnv := fs.String("password-env", "", "environment variable holding the account's password")
	anonymous := fs.Bool("allow-anonymous", false, "let clients without credentials connect")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	emb := alerts.EmbeddedConfig{Listen: broker.DefaultListen, AllowAnonymous: *anonymous}
	if *config != "" {
		cfg, err := alerts.LoadConfig(*config)
		if err != nil {
			return err
		}
		emb = cfg.Embedded
		emb.AllowAnonymous = emb.AllowAnonymous || *anonymous
	}
	if *user != "" {
		if (*passFile == "") == (*passEnv == "") {
			return errors.New("-user needs exactly one of -password-file or -password-env")
		}
		emb.Users = append(emb.Users, alerts.UserConfig{Username: *user, PasswordFile: *passFile, PasswordEnv: *passEnv})
	}
	if *listen != "" {
		emb.Listen = *listen
	}
	opts, err := mqttpub.BrokerOptions(emb, env.log)
	if err != nil {
		return err
	}
	b, err := broker.Start(ctx, opts)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "embedded MQTT broker listening on %s (%d users, anonymous %v)\n", b.Addr(), len(opts.Users), opts.AllowAnonymous)
	<-ctx.Done()
	return b.Close()
}
