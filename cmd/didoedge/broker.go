package main

import (
	"context"
	"fmt"

	"github.com/didoedge/didoedge/alerts/broker"
	"github.com/didoedge/didoedge/alerts/mqttpub"
	"github.com/didoedge/didoedge/runtime/runconfig"
)

// runBroker runs the embedded MQTT broker standalone until interrupted.
func runBroker(ctx context.Context, env *cliEnv, args []string) error {
	var f broker.StandaloneFlags
	fs := newFlagSet(env, "broker")
	f.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	emb, prefix := broker.Config{Listen: broker.DefaultListen}, "didoedge"
	if f.Config != "" {
		cfg, err := runconfig.LoadAlerts(f.Config)
		if err != nil {
			return err
		}
		emb, prefix = cfg.Embedded, cfg.TopicPrefix
	}
	if err := f.Apply(&emb); err != nil {
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
	fmt.Fprintln(env.stdout, b.Describe(opts))
	<-ctx.Done()
	return b.Close()
}
