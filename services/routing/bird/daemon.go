package bird

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Daemon is one BIRD process the routing service runs itself: its own
// configuration file, control socket and pid file under Dir, in the
// network namespace at NSPath ("" = routerd's own).
type Daemon struct {
	Bin    string // bird binary; "" looks up "bird"
	Dir    string
	NSPath string
	Log    *slog.Logger
}

// Conf, Socket and PidFile are the daemon's files.
func (d *Daemon) Conf() string    { return filepath.Join(d.Dir, "bird.conf") }
func (d *Daemon) Socket() string  { return filepath.Join(d.Dir, "bird.ctl") }
func (d *Daemon) PidFile() string { return filepath.Join(d.Dir, "bird.pid") }

// Installed returns the binary's path, or why there is none.
func (d *Daemon) Installed() (string, error) {
	name := d.Bin
	if name == "" {
		name = "bird"
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("the routing daemon is not installed (%s not found; install the bird2 package)", name)
	}
	return p, nil
}

// Check runs `bird -p` on text (written beside the real file). The error
// carries BIRD's message, with the scratch file's name cut.
func (d *Daemon) Check(text string) error {
	bin, err := d.Installed()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(d.Dir, 0o700); err != nil {
		return err
	}
	f := filepath.Join(d.Dir, "bird.conf.check")
	if err := os.WriteFile(f, []byte(text), 0o600); err != nil {
		return err
	}
	defer os.Remove(f)
	out, err := exec.Command(bin, "-p", "-c", f).CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(strings.ReplaceAll(string(out), f, "bird.conf"))
		return fmt.Errorf("BIRD refused the configuration: %s", strings.TrimPrefix(msg, "bird: "))
	}
	return nil
}

// Install swaps text in as the configuration file atomically.
func (d *Daemon) Install(text string) error {
	if err := os.MkdirAll(d.Dir, 0o700); err != nil {
		return err
	}
	tmp := d.Conf() + ".new"
	if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, d.Conf())
}

// Configure makes the running daemon load the configuration file.
func (d *Daemon) Configure(ctx context.Context) error {
	lines, err := Cmd(ctx, d.Socket(), "configure")
	if err != nil {
		return err
	}
	for _, l := range lines {
		switch l.Code {
		case 3, 4, 19, 18: // reconfigured, in progress, nothing to do, soft
			return nil
		}
	}
	return fmt.Errorf("bird: unexpected answer to configure: %v", lines)
}

// Run keeps the daemon running until ctx ends, then stops it. started is
// called each time a daemon answers on its socket (first start and after
// a restart), so the caller can load what it must.
func (d *Daemon) Run(ctx context.Context, started func()) error {
	bin, err := d.Installed()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(d.Dir, 0o700); err != nil {
		return err
	}
	d.killStale()
	backoff := 500 * time.Millisecond
	for {
		t0 := time.Now()
		err := d.runOnce(ctx, bin, started)
		if ctx.Err() != nil {
			return nil
		}
		d.Log.Error("bird exited; starting it again", "err", err, "after", backoff)
		if time.Since(t0) > time.Minute {
			backoff = 500 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 30*time.Second)
	}
}

func (d *Daemon) runOnce(ctx context.Context, bin string, started func()) error {
	args := []string{"-f", "-c", d.Conf(), "-s", d.Socket(), "-P", d.PidFile()}
	var cmd *exec.Cmd
	if d.NSPath != "" {
		cmd = exec.Command("nsenter", append([]string{"--net=" + d.NSPath, bin}, args...)...)
	} else {
		cmd = exec.Command(bin, args...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	out := &logWriter{log: d.Log}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// Wait for its socket.
	ready := false
	for i := 0; i < 200 && !ready; i++ {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := Cmd(cctx, d.Socket(), "show status")
		cancel()
		if err == nil {
			ready = true
			break
		}
		select {
		case err := <-done:
			return fmt.Errorf("%v: %s", err, strings.TrimSpace(out.String()))
		case <-ctx.Done():
			d.stop(cmd, done)
			return ctx.Err()
		case <-time.After(25 * time.Millisecond):
		}
	}
	if !ready {
		d.stop(cmd, done)
		return errors.New("bird did not open its control socket within 5 s")
	}
	d.Log.Info("bird running", "pid", cmd.Process.Pid, "socket", d.Socket())
	if started != nil {
		started()
	}
	select {
	case err := <-done:
		return fmt.Errorf("%v: %s", err, strings.TrimSpace(out.String()))
	case <-ctx.Done():
		d.stop(cmd, done)
		return ctx.Err()
	}
}

// stop asks the daemon to end (SIGTERM: it withdraws its kernel routes),
// then kills it after 5 s.
func (d *Daemon) stop(cmd *exec.Cmd, done chan error) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
	_ = os.Remove(d.PidFile())
}

// killStale ends a daemon left by a routerd that was killed (its pid file
// names a live bird using our socket).
func (d *Daemon) killStale() {
	raw, err := os.ReadFile(d.PidFile())
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || pid <= 1 {
		return
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !strings.Contains(string(cmdline), d.Socket()) {
		return
	}
	d.Log.Warn("ending a bird left running by a previous routerd", "pid", pid)
	_ = syscall.Kill(pid, syscall.SIGTERM)
	for i := 0; i < 100; i++ {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		time.Sleep(50 * time.Millisecond) // waiting for a foreign process to end: no event to wait on
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

// logWriter passes BIRD's log (it logs to stderr) into the service's log
// line by line, keeping the last lines for the error of an exit.
type logWriter struct {
	log     *slog.Logger
	mu      sync.Mutex
	partial []byte
	last    []string
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		line := strings.TrimSpace(string(w.partial[:i]))
		w.partial = w.partial[i+1:]
		if line == "" {
			continue
		}
		w.log.Info("bird: " + line)
		w.last = append(w.last, line)
		if len(w.last) > 20 {
			w.last = w.last[1:]
		}
	}
	if len(w.partial) > 64<<10 {
		w.partial = w.partial[:0]
	}
	return len(p), nil
}

// String is the last lines BIRD wrote.
func (w *logWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.last, "\n")
}
