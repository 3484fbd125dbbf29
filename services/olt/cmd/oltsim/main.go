// Command oltsim serves simulated Huawei SmartAX OLTs over telnet and SSH
// on loopback, for developing and testing the router without hardware.
//
//	oltsim -olts 2 -latency 50ms -autofind 0/1/0=48575443AABBCC01
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"routerd.dev/services/olt/sim"
)

func main() {
	var (
		addr     = flag.String("addr", "127.0.0.1", "address to listen on (each OLT gets its own telnet and SSH port)")
		n        = flag.Int("olts", 1, "number of OLTs")
		model    = flag.String("model", string(sim.MA5800), "firmware: MA5800-X7, MA5608T or MA5683T")
		user     = flag.String("user", "root", "login user")
		pass     = flag.String("pass", "admin", "login password")
		latency  = flag.Duration("latency", 0, "delay before every answer")
		paging   = flag.Bool("paging", true, "page output with ---- More ----")
		alarms   = flag.Bool("alarms", false, "print alarm blocks in the middle of outputs")
		autofind = flag.String("autofind", "", "comma-separated PORT=SN ONTs to seed in autofind")
	)
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := sim.Config{Addr: *addr, Logger: log}
	var seeds []sim.AutofindONT
	for _, kv := range strings.Split(*autofind, ",") {
		if port, sn, ok := strings.Cut(strings.TrimSpace(kv), "="); ok {
			seeds = append(seeds, sim.AutofindONT{Port: port, SN: sn})
		}
	}
	for i := range *n {
		cfg.OLTs = append(cfg.OLTs, sim.OLTConfig{Name: fmt.Sprintf("OLT%d", i+1), Model: sim.Model(*model), User: *user,
			Pass: *pass, Latency: *latency, NoPaging: !*paging, Alarms: *alarms, Autofind: seeds})
	}
	if err := run(ctx, cfg, log); err != nil {
		log.Error("oltsim failed", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg sim.Config, log *slog.Logger) error {
	srv, err := sim.Start(ctx, cfg)
	if err != nil {
		return err
	}
	for _, o := range srv.OLTs() {
		log.Info("olt listening", "name", o.Name(), "telnet", o.TelnetAddr(), "ssh", o.SSHAddr())
	}
	<-ctx.Done()
	done := make(chan struct{})
	go func() { srv.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
	return nil
}
