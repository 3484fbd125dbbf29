package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"routerd.dev/shared/config"
	"routerd.dev/shared/licence"
)

const licenceUsage = `usage: routerd licence [--config FILE | --state DIR] show | install FILE | remove

The router's licence lives in its state directory and is managed only here,
on the router's command line: the API can read its effects (OLT writes
refused without the olt-write feature, a licence alert in GET /alerts and
GET /doctor) but never change it. install checks the file first (features
routerd knows, expiry YYYY-MM-DD) and replaces the old one atomically; "-"
reads it from standard input. The running routerd reads it at each use.
`

// licenceCommand is `routerd licence ...`.
func licenceCommand(args []string) error {
	fs := flag.NewFlagSet("licence", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), licenceUsage) }
	configPath := fs.String("config", "", "configuration file naming state_dir")
	stateDir := fs.String("state", "", "state directory, overriding state_dir")
	if err := fs.Parse(args); err != nil {
		return err
	}
	dir := *stateDir
	if dir == "" {
		cfg, err := config.Load(*configPath)
		if err != nil {
			return err
		}
		dir = cfg.StateDir
	}
	switch verb := fs.Arg(0); {
	case verb == "show" || verb == "":
		l, err := licence.Read(dir)
		if err != nil {
			return err
		}
		fmt.Printf("licence:  %s\nfeatures: %s\n", licence.Path(dir), strings.Join(l.Features, ", "))
		if l.Holder != "" {
			fmt.Printf("holder:   %s\n", l.Holder)
		}
		switch {
		case l.Expires == "":
			fmt.Println("expires:  never")
		case l.Expired(time.Now()):
			fmt.Printf("expires:  %s (EXPIRED)\n", l.Expires)
		default:
			fmt.Printf("expires:  %s (%d days left)\n", l.Expires, int(time.Until(l.Ends()).Hours()/24))
		}
		return nil
	case verb == "install" && fs.NArg() == 2:
		var raw []byte
		var err error
		if fs.Arg(1) == "-" {
			raw, err = io.ReadAll(io.LimitReader(os.Stdin, 1<<20))
		} else {
			raw, err = os.ReadFile(fs.Arg(1))
		}
		if err != nil {
			return err
		}
		l, err := licence.Install(dir, raw)
		if err != nil {
			return err
		}
		fmt.Printf("licence installed in %s: features %s\n", licence.Path(dir), strings.Join(l.Features, ", "))
		return nil
	case verb == "remove" && fs.NArg() == 1:
		if err := licence.Remove(dir); err != nil && !errors.Is(err, licence.ErrMissing) {
			return err
		}
		fmt.Println("licence removed: licensed features are refused from now on")
		return nil
	}
	fs.Usage()
	return errors.New("licence: unknown command")
}
