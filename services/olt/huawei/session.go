package huawei

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"routerd.dev/services/olt/driver"
	"routerd.dev/services/olt/huawei/parse"
)

// Telnet protocol bytes (RFC 854/857/858): only what a SmartAX negotiates.
const (
	tIAC    = 255
	tDONT   = 254
	tDO     = 253
	tWONT   = 252
	tWILL   = 251
	tSB     = 250
	tSE     = 240
	optEcho = 1
	optSGA  = 3
)

var (
	// A prompt is the sysname (anything but blanks and the prompt's own
	// characters: operators name OLTs "POP@North:1"), the mode in
	// parentheses, > or #, possibly after blanks some firmware leaves.
	promptRe  = regexp.MustCompile(`(?:^|\n)[ \t]*([^\s#>()]+)(\([A-Za-z0-9_\-/.]+\))?([>#])\s*$`)
	moreEndRe = regexp.MustCompile(`-+ More \( Press 'Q' to break \) -+\s*$`)
	paramEnd  = regexp.MustCompile(`\{ ?<cr>[^\n]*\}:\s*$`)
	confirmRe = regexp.MustCompile(`\(y/n\)\[[yn]\]:\s*$`)
	ansiRe    = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]`)
)

// settleTime is how long a prompt must stand unanswered at the end of a
// reply whose echo was not recognised before it ends the reply.
const settleTime = 2 * time.Second

// session is one logged-in CLI connection. It is used by one call at a
// time; the pool hands it out.
type session struct {
	host   string
	closer io.Closer
	w      io.Writer
	wmu    sync.Mutex
	chunks chan []byte
	errc   chan error
	prompt string // last prompt seen, e.g. "OLT1(config)#"
	broken bool
	// echoes is set once the OLT was seen echoing commands; from then on a
	// prompt only ends a reply after the echo, so a prompt the OLT reprints
	// after an asynchronous alarm is not taken for the end of the answer.
	echoes   bool
	lastUsed time.Time
	settle   time.Duration     // settleTime unless a test shortens it
	stall    time.Duration     // DefaultStallTimeout unless Config.StallTimeout says otherwise
	ex       []driver.Exchange // the current call's transcript
	alarms   []string
}

func (s *session) send(text string) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_, err := io.WriteString(s.w, text)
	return err
}

// startReader pumps r into s.chunks; filter (telnet) may rewrite bytes
// and answer negotiation.
func (s *session) startReader(r io.Reader, filter func([]byte) (data, reply []byte)) {
	s.chunks = make(chan []byte, 64)
	s.errc = make(chan error, 1)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				b := append([]byte(nil), buf[:n]...)
				if filter != nil {
					var reply []byte
					b, reply = filter(b)
					if len(reply) > 0 {
						s.send(string(reply))
					}
				}
				if len(b) > 0 {
					s.chunks <- b
				}
			}
			if err != nil {
				s.errc <- err
				close(s.chunks)
				return
			}
		}
	}()
}

// telnetFilter removes option negotiation from the stream and answers it:
// yes to the OLT echoing and suppressing go-ahead, no to anything else.
func telnetFilter() func([]byte) (data, reply []byte) {
	state, cmd := 0, byte(0)
	return func(in []byte) (out, replies []byte) {
		for _, b := range in {
			switch state {
			case 0:
				if b == tIAC {
					state = 1
				} else {
					out = append(out, b)
				}
			case 1:
				switch b {
				case tIAC:
					out = append(out, b)
					state = 0
				case tWILL, tWONT, tDO, tDONT:
					cmd, state = b, 2
				case tSB:
					state = 3
				default:
					state = 0
				}
			case 2:
				var reply []byte
				switch {
				case cmd == tWILL && (b == optEcho || b == optSGA):
					reply = []byte{tIAC, tDO, b}
				case cmd == tWILL:
					reply = []byte{tIAC, tDONT, b}
				case cmd == tDO:
					reply = []byte{tIAC, tWONT, b}
				}
				replies = append(replies, reply...)
				state = 0
			case 3:
				if b == tIAC {
					state = 4
				}
			case 4:
				if b == tSE {
					state = 0
				} else {
					state = 3
				}
			}
		}
		return out, replies
	}
}

// until reads until the OLT shows a prompt, answering the paging prompt
// with a space, the parameter prompt with Enter and y/n questions with y.
// It returns everything read, verbatim.
func (s *session) until(ctx context.Context, stop func(window string) bool) (string, error) {
	return s.untilFull(ctx, func(w, _ string) bool { return stop(w) }, nil)
}

// untilFull is until with a stop condition that also sees everything read
// so far (not only the window at the end); while ready (when given) says
// no, what looks like a question is not answered (it is in the echo of
// the command: free text of a description).
func (s *session) untilFull(ctx context.Context, stop func(window, full string) bool, ready func() bool) (string, error) {
	var buf strings.Builder
	handled := 0 // bytes of buf already answered
	// settle is armed when a prompt ends the buffer but stop still wants
	// more (the echo was not recognised): if the OLT then stays quiet,
	// the prompt is taken as the end rather than waiting for the timeout.
	var settle <-chan time.Time
	// A question left standing while ready says no is answered after the
	// settle time all the same (an echo the OLT garbled beyond
	// recognition must not leave a parameter prompt waiting forever).
	var question <-chan time.Time
	force := false
	// A session on which nothing arrives for the stall time is dead (a
	// hung OLT process, a link silently gone): fail now rather than at the
	// end of the operation's whole timeout.
	stall := time.NewTimer(cmpDur(s.stall, DefaultStallTimeout))
	defer stall.Stop()
	for {
		// Prompts are at the end: looking at the last few KB keeps a long
		// unpaged output linear to read.
		tail := buf.String()[max(handled, buf.Len()-4096):]
		clean := ansiRe.ReplaceAllString(tail, "")
		settle, question = nil, nil
		// Every prompt the OLT leaves waiting ends in one of these; the
		// regular expressions are not run on the middle of an output.
		t := strings.TrimRight(clean, " ")
		waiting := t != "" && strings.ContainsRune("#>:-", rune(t[len(t)-1]))
		switch {
		case stop(clean, buf.String()):
			return buf.String(), nil
		case !waiting:
		case isPrompt(clean):
			settle = time.After(cmpDur(s.settle, settleTime))
		case ready != nil && !ready() && !force:
			question = time.After(cmpDur(s.settle, settleTime))
		case moreEndRe.MatchString(clean):
			handled = buf.Len()
			if err := s.send(" "); err != nil {
				return buf.String(), err
			}
		case paramEnd.MatchString(clean):
			handled = buf.Len()
			if err := s.send("\r\n"); err != nil {
				return buf.String(), err
			}
		case confirmRe.MatchString(clean):
			handled = buf.Len()
			if err := s.send("y\r\n"); err != nil {
				return buf.String(), err
			}
		}
		select {
		case <-settle:
			return buf.String(), nil
		case <-question:
			force = true
		case <-ctx.Done():
			s.broken = true
			return buf.String(), fmt.Errorf("%w (%v)", driver.ErrTimeout, ctx.Err())
		case <-stall.C:
			s.broken = true
			return buf.String(), fmt.Errorf("%w: the OLT sent nothing for %v", driver.ErrTimeout, cmpDur(s.stall, DefaultStallTimeout))
		case b, ok := <-s.chunks:
			if !ok {
				s.broken = true
				err := <-s.errc
				s.errc <- err
				return buf.String(), fmt.Errorf("connection to %s lost: %w", s.host, err)
			}
			buf.Write(b)
			if !stall.Stop() {
				select {
				case <-stall.C:
				default:
				}
			}
			stall.Reset(cmpDur(s.stall, DefaultStallTimeout))
		}
	}
}

func isPrompt(text string) bool { return promptRe.MatchString(text) }

// exec sends one command and returns its cleaned output (echo and prompt
// removed) and the OLT's error, if it printed one.
func (s *session) exec(ctx context.Context, cmd string) (string, error) {
	if s.broken {
		return "", errors.New("session is broken")
	}
	s.drain()
	if err := s.send(cmd + "\r\n"); err != nil {
		s.broken = true
		return "", err
	}
	// The echo is compared without any whitespace: the OLT may break a
	// long command line anywhere when it echoes it, in fragments. An
	// alarm may come before it (the prompt reprinted after it) or in its
	// middle (the prompt and the part typed so far reprinted after it):
	// the echo is looked for in the reply with alarms taken out.
	echo := strings.Join(strings.Fields(cmd), "")
	seen := false
	raw, err := s.untilFull(ctx, func(window, full string) bool {
		if t := strings.TrimRight(window, " "); !seen && s.echoes && t != "" && strings.ContainsRune("#>:-\"", rune(t[len(t)-1])) {
			seen = echoed(full, cmd, echo)
		}
		return (seen || !s.echoes) && isPrompt(window)
	}, func() bool { return seen || !s.echoes })
	switch {
	case err == nil && s.echoes && !seen:
		// The prompt stood unanswered without any echo before it (the
		// settle time): this OLT does not echo; stop waiting for echoes.
		s.echoes = false
	case !s.echoes && echoed(raw, cmd, echo):
		s.echoes = true
	}
	s.ex = append(s.ex, driver.Exchange{Sent: cmd, Reply: raw})
	if err != nil {
		return "", err
	}
	text, alarms := parse.Clean(raw)
	s.alarms = append(s.alarms, alarms...)
	lines := strings.Split(text, "\n")
	lines = stripEcho(lines, cmd, s.echoes)
	if n := len(lines); n > 0 {
		if m := promptRe.FindStringSubmatch("\n" + lines[n-1]); m != nil {
			s.prompt = m[1] + m[2] + m[3]
			lines = lines[:n-1]
		}
	}
	// An alarm printed right after the answer's prompt is followed by the
	// prompt again: the first one is not output.
	bare := func(l string) bool { return s.prompt != "" && strings.TrimSpace(l) == s.prompt }
	for n := len(lines); n > 0 && (strings.TrimSpace(lines[n-1]) == "" || bare(lines[n-1])); n = len(lines) {
		if strings.TrimSpace(lines[n-1]) == "" && (n < 2 || !bare(lines[n-2])) {
			break
		}
		lines = lines[:n-1]
	}
	out := strings.Join(lines, "\n")
	if e := parse.Error(out); e != "" {
		return out, &driver.CommandError{Command: cmd, Text: e}
	}
	return out, nil
}

// drain takes what the OLT printed while the session was idle (an
// asynchronous alarm and the prompt reprinted after it) out of the way of
// the next command, keeping it in the transcript and the alarm list.
func (s *session) drain() {
	var b strings.Builder
	for more := true; more; {
		select {
		case c, ok := <-s.chunks:
			if !ok {
				s.pushClosed()
				more = false
				break
			}
			b.Write(c)
		default:
			more = false
		}
	}
	if b.Len() > 0 {
		_, alarms := parse.Clean(b.String())
		s.alarms = append(s.alarms, alarms...)
		s.ex = append(s.ex, driver.Exchange{Reply: b.String()})
	}
}

// alive reports whether the connection is still open, taking anything the
// OLT printed meanwhile out of the way.
func (s *session) alive() bool {
	s.drain()
	select {
	case err := <-s.errc:
		s.errc <- err
		s.broken = true
		return false
	default:
		return !s.broken
	}
}

// pushClosed restores the closed state drain consumed.
func (s *session) pushClosed() {
	c := make(chan []byte)
	close(c)
	s.chunks = c
}

// echoed reports whether the reply so far holds the echo of cmd (echo is
// cmd without whitespace), alarms taken out. The echo comes first: the
// head of the reply is enough, however long the alarms before it.
func echoed(full, cmd, echo string) bool {
	if !strings.Contains(full, "ALARM") {
		head := full[:min(len(full), 4*len(cmd)+4096)]
		return strings.Contains(strings.Join(strings.Fields(ansiRe.ReplaceAllString(head, "")), ""), echo)
	}
	// Not in the alarm's own text (an alarm may name the command's words).
	text, _ := parse.Clean(full[:min(len(full), 4*len(cmd)+256<<10)])
	lines := strings.Split(text, "\n")
	return len(stripEcho(lines, cmd, true)) != len(lines)
}

// stripEcho removes the echo of cmd from the start of a reply, with
// anything before it (the prompt the OLT reprinted after an alarm, the
// part of the line echoed before an alarm interrupted it); the echo may
// be broken over several lines. An OLT not known to echo has its echo
// looked for only among the first lines.
func stripEcho(lines []string, cmd string, echoes bool) []string {
	want := strings.Join(strings.Fields(cmd), "")
	// The lines were cleaned: so is the echo in them (a description
	// holding the paging marker lost it).
	c, _ := parse.Clean(cmd)
	cleaned := strings.Join(strings.Fields(c), "")
	starts := 8
	if echoes {
		starts = 64
	}
	for start := 0; start < len(lines) && start < starts; start++ {
		acc := ""
		for j := start; j < len(lines) && j < start+6; j++ {
			acc += strings.Join(strings.Fields(lines[j]), "")
			if strings.HasSuffix(acc, want) || (cleaned != "" && strings.HasSuffix(acc, cleaned)) {
				return lines[j+1:]
			}
		}
	}
	return lines
}

// mode is the CLI mode of the last prompt: "user", "privileged", "config",
// "config-if-gpon-0/1", ...
func (s *session) mode() string { return parse.Mode(s.prompt) }

func (s *session) close() {
	s.broken = true
	s.closer.Close()
}

// dialError is a failed login with the exchanges up to the failure.
type dialError struct {
	err error
	ex  []driver.Exchange
}

func (e *dialError) Error() string { return e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

type dialer struct {
	host, user, pass string
	port             int
	protocol         string
	// hostKey is the SSH host key the OLT must present (authorized_keys
	// form); empty accepts the first and reports it to seen.
	hostKey string
	seen    func(SSHSeen)
	stall   time.Duration
}

// DefaultStallTimeout is how long a session may receive nothing while a
// reply is awaited before it is given up as dead.
const DefaultStallTimeout = 60 * time.Second

// SSHSeen is what an SSH connection learnt of an OLT: its host key and
// the algorithms negotiated, with those Go leaves out by default (CBC
// ciphers, SHA-1 key exchanges) listed in Legacy.
type SSHSeen struct {
	Host, HostKey, Fingerprint string
	Port                       int
	Legacy                     []string
}

// sshAlgorithms are Go's defaults followed by the older algorithms of
// MA5600T/MA5683T firmware: the OLT's own preference decides, so the old
// ones are used only when it offers nothing better.
func sshAlgorithms() ssh.Config {
	sup, old := ssh.SupportedAlgorithms(), ssh.InsecureAlgorithms()
	return ssh.Config{
		KeyExchanges: append(sup.KeyExchanges, old.KeyExchanges...),
		Ciphers:      append(sup.Ciphers, old.Ciphers...),
		MACs:         append(sup.MACs, old.MACs...),
	}
}

func legacyOf(a ssh.NegotiatedAlgorithms) []string {
	old := ssh.InsecureAlgorithms()
	var out []string
	for _, x := range []struct {
		alg  string
		list []string
	}{{a.KeyExchange, old.KeyExchanges}, {a.HostKey, old.HostKeys}, {a.Read.Cipher, old.Ciphers},
		{a.Write.Cipher, old.Ciphers}, {a.Read.MAC, old.MACs}, {a.Write.MAC, old.MACs}} {
		if x.alg != "" && slices.Contains(x.list, x.alg) && !slices.Contains(out, x.alg) {
			out = append(out, x.alg)
		}
	}
	return out
}

// dial connects and logs in, leaving the session in config mode.
func dial(ctx context.Context, d dialer) (*session, error) {
	addr := net.JoinHostPort(d.host, fmt.Sprint(d.port))
	var nd net.Dialer
	c, err := nd.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	// SmartAX OLTs echo what they are sent (telnet and SSH alike): a
	// prompt ends a reply only after the echo from the first command on,
	// so an alarm and the prompt reprinted after it, before the echo of
	// enable, cannot end its reply early. A session whose OLT turns out
	// not to echo stops expecting it (exec).
	s := &session{host: d.host, stall: d.stall, echoes: true}
	switch d.protocol {
	case "ssh":
		var presented string
		cc, chans, reqs, err := ssh.NewClientConn(c, addr, &ssh.ClientConfig{
			Config: sshAlgorithms(),
			User:   d.user,
			// MA5800 firmware asks for the password by keyboard-interactive
			// ("User password:"), older releases by plain password auth.
			Auth: []ssh.AuthMethod{ssh.Password(d.pass), ssh.KeyboardInteractive(
				func(_, _ string, questions []string, _ []bool) ([]string, error) {
					answers := make([]string, len(questions))
					for i := range answers {
						answers[i] = d.pass
					}
					return answers, nil
				})},
			// OLTs present self-signed keys the router cannot know in
			// advance: the first one seen is recorded (trust on first
			// use) and every later connection must present the same.
			HostKeyCallback: func(_ string, _ net.Addr, key ssh.PublicKey) error {
				presented = strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key)))
				if d.hostKey != "" && presented != d.hostKey {
					return &driver.HostKeyError{Host: d.host, Fingerprint: ssh.FingerprintSHA256(key)}
				}
				return nil
			},
		})
		if err != nil {
			c.Close()
			var hk *driver.HostKeyError
			if errors.As(err, &hk) {
				return nil, hk
			}
			if strings.Contains(err.Error(), "unable to authenticate") {
				return nil, &driver.LoginError{Host: d.host, Reason: err.Error()}
			}
			return nil, err
		}
		if d.seen != nil {
			seen := SSHSeen{Host: d.host, Port: d.port, HostKey: presented}
			if k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(presented)); err == nil {
				seen.Fingerprint = ssh.FingerprintSHA256(k)
			}
			if am, ok := cc.(ssh.AlgorithmsConnMetadata); ok {
				seen.Legacy = legacyOf(am.Algorithms())
			}
			d.seen(seen)
		}
		client := ssh.NewClient(cc, chans, reqs)
		sess, err := client.NewSession()
		if err != nil {
			client.Close()
			return nil, err
		}
		if err := sess.RequestPty("vt100", 0, 512, ssh.TerminalModes{ssh.ECHO: 1}); err != nil {
			client.Close()
			return nil, err
		}
		stdin, _ := sess.StdinPipe()
		stdout, _ := sess.StdoutPipe()
		if err := sess.Shell(); err != nil {
			client.Close()
			return nil, err
		}
		s.w, s.closer = stdin, client
		s.startReader(stdout, nil)
	default:
		s.w, s.closer = c, c
		s.startReader(c, telnetFilter())
		if err := s.telnetLogin(ctx, d); err != nil {
			s.close()
			return nil, &dialError{err: err, ex: s.ex}
		}
	}
	c.SetDeadline(time.Time{})
	first, err := s.until(ctx, isPrompt)
	if err != nil {
		s.close()
		return nil, &dialError{err: err, ex: s.ex}
	}
	// An alarm printed with the banner is reported like any other.
	_, alarms := parse.Clean(first)
	s.alarms = append(s.alarms, alarms...)
	for _, cmd := range []string{"enable", "config"} {
		if _, err := s.exec(ctx, cmd); err != nil {
			s.close()
			return nil, &dialError{err: err, ex: s.ex}
		}
	}
	s.ex = nil
	return s, nil
}

func (s *session) telnetLogin(ctx context.Context, d dialer) error {
	ends := func(suffix string) func(string) bool {
		return func(t string) bool { return strings.HasSuffix(strings.TrimRight(t, " "), suffix) }
	}
	banner, err := s.until(ctx, ends("User name:"))
	s.ex = append(s.ex, driver.Exchange{Reply: banner})
	if err != nil {
		return err
	}
	if err := s.send(d.user + "\r\n"); err != nil {
		return err
	}
	ask, err := s.until(ctx, ends("User password:"))
	s.ex = append(s.ex, driver.Exchange{Sent: d.user, Reply: ask})
	if err != nil {
		return err
	}
	if err := s.send(d.pass + "\r\n"); err != nil {
		return err
	}
	// A refusal says so and asks for the user name again, or hangs up. A
	// prompt means logged in, whatever the banner before it says (legal
	// notices speak of "invalid" access and "locked" accounts).
	refused := regexp.MustCompile(`invalid|upper limit|locked`)
	again := ends("User name:")
	raw, err := s.until(ctx, func(t string) bool { return isPrompt(t) || again(t) })
	// The password itself never goes into a transcript.
	s.ex = append(s.ex, driver.Exchange{Sent: "********", Reply: raw})
	if err != nil {
		// Some firmware says why and hangs up at once.
		if refused.MatchString(raw) {
			text, _ := parse.Clean(raw)
			return &driver.LoginError{Host: d.host, Reason: strings.TrimSpace(text)}
		}
		return err
	}
	if again(raw) || !isPrompt(ansiRe.ReplaceAllString(raw, "")) {
		text, _ := parse.Clean(raw)
		return &driver.LoginError{Host: d.host, Reason: strings.TrimSpace(text)}
	}
	_, alarms := parse.Clean(raw)
	s.alarms = append(s.alarms, alarms...)
	// until consumed the prompt; dial waits for it again, so replay it.
	s.prompt = strings.TrimSpace(raw[strings.LastIndexAny(raw, "\n")+1:])
	s.pushBack(s.prompt)
	return nil
}

// pushBack makes text the next thing read.
func (s *session) pushBack(text string) {
	old := s.chunks
	nc := make(chan []byte, 64)
	nc <- []byte(text)
	go func() {
		for b := range old {
			nc <- b
		}
		close(nc)
	}()
	s.chunks = nc
}

func cmpDur(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
