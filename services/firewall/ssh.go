package firewall

import (
	"bufio"
	"context"
	"io"
	"net/netip"
	"os"
	"regexp"
	"syscall"
	"time"
)

// SSHJail is the jail of sshd's failures.
const SSHJail = "sshd"

// sshFailure matches the lines sshd writes for a failed login and takes
// the source address (fail2ban's sshd filter, its common forms).
var sshFailure = regexp.MustCompile(`sshd(?:-session)?\[\d+\]: (?:Failed (?:password|publickey|keyboard-interactive/pam) for (?:invalid user )?\S* from |Invalid user \S* from |Connection closed by (?:authenticating|invalid) user \S* |authentication failure;.* rhost=|Disconnected from (?:authenticating|invalid) user \S* )([0-9a-fA-F.:]+)`)

// SSHFailureAddr returns the address of a failed login in one log line.
func SSHFailureAddr(line string) (netip.Addr, bool) {
	m := sshFailure.FindStringSubmatch(line)
	if m == nil {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(m[1])
	return a, err == nil
}

// followSSH reads the lines sshd appends to Deps.SSHLog (from its end at
// start; from the beginning again after a rotation) and counts each
// failure in the sshd jail, until ctx ends.
func (s *Service) followSSH(ctx context.Context) {
	path := s.deps.SSHLog
	var f *os.File
	var r *bufio.Reader
	var ino uint64
	var off int64
	open := func(fromEnd bool) {
		if f != nil {
			f.Close()
			f = nil
		}
		nf, err := os.Open(path)
		if err != nil {
			return
		}
		st, err := nf.Stat()
		if err != nil {
			nf.Close()
			return
		}
		off = 0
		if fromEnd {
			off = st.Size()
		}
		if _, err := nf.Seek(off, io.SeekStart); err != nil {
			nf.Close()
			return
		}
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			ino = sys.Ino
		}
		f, r = nf, bufio.NewReader(nf)
	}
	open(true)
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	partial := ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if f == nil {
			open(false)
			if f == nil {
				continue
			}
		}
		// Rotated or truncated: start the new file from its beginning.
		if st, err := os.Stat(path); err == nil {
			sys, _ := st.Sys().(*syscall.Stat_t)
			if (sys != nil && sys.Ino != ino) || st.Size() < off {
				open(false)
				partial = ""
				if f == nil {
					continue
				}
			}
		}
		for {
			line, err := r.ReadString('\n')
			off += int64(len(line))
			if err != nil {
				partial += line
				break
			}
			line, partial = partial+line, ""
			if a, ok := SSHFailureAddr(line); ok {
				_ = s.sshBans.failure(ctx, a, 22, "")
			}
		}
	}
}
