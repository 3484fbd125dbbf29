package sim

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// session is one logged-in CLI user.
type session struct {
	olt      *OLT
	in       byteReader
	out      io.Writer
	mode     string // user, priv, config, gpon, mpu, line, srv
	iface    string // "0/1" in interface modes
	profID   int    // profile being edited in line/srv modes
	noSmart  bool   // `undo smart`: no parameter prompts
	noPaging bool   // `screen-length 0 temporary` / `scroll`
	lastCR   bool
	closed   bool
	wmu      sync.Mutex // AsyncAlarm writes from another goroutine
	id       int        // numbered from 1 per OLT at the first command
}

// reply is what a command does: an optional parameter prompt to answer
// with Enter first, an optional y/n question, then run (under the OLT lock)
// which returns the output.
type reply struct {
	param   string
	confirm string
	run     func() string
}

func (s *session) write(text string) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_, err := io.WriteString(s.out, strings.ReplaceAll(text, "\n", "\r\n"))
	return err
}

// echo writes the echo of a line in small pieces, as a real OLT's echo
// arrives (netmiko issue 1628), so clients must reassemble it.
func (s *session) echo(text string) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	b := []byte(strings.ReplaceAll(text, "\n", "\r\n"))
	for len(b) > 0 {
		n := min(len(b), 7)
		if _, err := s.out.Write(b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// echoLine echoes a command line; a pending TypingAlarm interrupts it
// after its first characters, and the prompt and the part typed so far
// are printed again after the alarm.
func (s *session) echoLine(text string, atPrompt bool) error {
	o := s.olt
	o.mu.Lock()
	var alarm string
	at := 0
	if atPrompt && len(o.typing) > 0 {
		ta := o.typing[0]
		o.typing = o.typing[1:]
		alarm = o.alarmText(ta.name, "FrameID: 0, SlotID: 1, PortID: 0, ONT ID: 1, Equipment ID: 1H")
		at = min(ta.at, len(text))
	}
	o.mu.Unlock()
	if alarm == "" {
		return s.echo(text + "\n")
	}
	if err := s.echo(text[:at]); err != nil {
		return err
	}
	if err := s.write("\n" + strings.TrimPrefix(alarm, "\n") + o.cfg.PromptIndent + s.prompt() + text[:at]); err != nil {
		return err
	}
	// The client sees the reprinted prompt alone before the rest of the
	// echo arrives.
	time.Sleep(20 * time.Millisecond)
	return s.echo(text[at:] + "\n")
}

// readLine reads one line, accepting CR, LF, CRLF and CR NUL as its end.
func (s *session) readLine(echo bool) (string, error) { return s.readLineAt(echo, false) }

// readLineAt is readLine; a command line (atPrompt) may be interrupted
// by a TypingAlarm while it is echoed.
func (s *session) readLineAt(echo, atPrompt bool) (string, error) {
	var b []byte
	for {
		c, err := s.in.ReadByte()
		if err != nil {
			return "", err
		}
		if s.lastCR && (c == '\n' || c == 0) {
			s.lastCR = false
			continue
		}
		s.lastCR = c == '\r'
		switch c {
		case '\r', '\n':
			if echo {
				if err := s.echoLine(string(b), atPrompt); err != nil {
					return "", err
				}
			}
			return string(b), nil
		case 8, 127:
			if len(b) > 0 {
				b = b[:len(b)-1]
			}
		default:
			b = append(b, c)
		}
	}
}

func (s *session) login() bool {
	for try := 0; try < 3; try++ {
		if s.write("\n>>User name:") != nil {
			return false
		}
		user, err := s.readLine(true)
		if err != nil {
			return false
		}
		if s.write("\n>>User password:") != nil {
			return false
		}
		pass, err := s.readLine(false)
		if err != nil {
			return false
		}
		if user == s.olt.cfg.User && pass == s.olt.cfg.Pass {
			s.banner()
			return true
		}
		s.write("\n  Username or password invalid.\n")
	}
	s.write("\n  Reenter times have reached the upper limit.\n")
	return false
}

func (s *session) banner() {
	now := s.olt.now()
	s.mode = "user"
	s.write(fmt.Sprintf(`

  Huawei Integrated Access Software (%s).
  Copyright(C) Huawei Technologies Co., Ltd. 2002-2023. All rights reserved.

  -----------------------------------------------------------------------------
  User last login information:
  -----------------------------------------------------------------------------
  Access Type : Telnet
  IP-Address  : 127.0.0.1
  Login  Time : %s
  Logout Time : %s
  -----------------------------------------------------------------------------

`, modelFamily(s.olt.model), now.Add(-time.Hour).Format("2006-01-02 15:04:05-07:00"),
		now.Add(-50*time.Minute).Format("2006-01-02 15:04:05-07:00")))
	if b := s.olt.cfg.Banner; b != "" {
		// Its own write, and a pause before the prompt (the OLT
		// prepares the CLI): a client sees the banner alone first.
		s.write(b + "\n\n")
		time.Sleep(20 * time.Millisecond)
	}
}

func modelFamily(m Model) string {
	if m == MA5800 {
		return "MA5800"
	}
	return "MA5600"
}

func (s *session) prompt() string {
	o := s.olt
	o.mu.Lock()
	name := o.st.sysname
	o.mu.Unlock()
	switch s.mode {
	case "user":
		return name + ">"
	case "priv":
		return name + "#"
	case "config":
		return name + "(config)#"
	case "gpon":
		return name + "(config-if-gpon-" + s.iface + ")#"
	case "mpu":
		return name + "(config-if-mpu-" + s.iface + ")#"
	case "line":
		return fmt.Sprintf("%s(config-gpon-lineprofile-%d)#", name, s.profID)
	case "srv":
		return fmt.Sprintf("%s(config-gpon-srvprofile-%d)#", name, s.profID)
	case "btv":
		return name + "(config-btv)#"
	case "mvlan":
		return fmt.Sprintf("%s(config-mvlan%d)#", name, s.profID)
	}
	return name + ">"
}

func (s *session) run(ctx context.Context) {
	for !s.closed && ctx.Err() == nil {
		p := s.prompt()
		o := s.olt
		// Idle from the moment the prompt is out: an AsyncAlarm after the
		// client saw the prompt must find this session.
		o.mu.Lock()
		o.idle[s] = true
		o.mu.Unlock()
		if s.write("\n"+o.cfg.PromptIndent+p) != nil {
			return
		}
		line, err := s.readLineAt(true, true)
		o.mu.Lock()
		delete(o.idle, s)
		o.mu.Unlock()
		if err != nil {
			return
		}
		o.mu.Lock()
		o.commands++
		o.received[strings.TrimSpace(line)]++
		if s.id == 0 {
			o.sessionSeq++
			s.id = o.sessionSeq
		}
		if o.cfg.LogCommands && strings.TrimSpace(line) != "" {
			o.cmdLog = append(o.cmdLog, CommandLog{At: time.Now(), Session: s.id, Line: strings.TrimSpace(line)})
		}
		lat := o.latency
		drop := o.dropNext != "" && strings.HasPrefix(strings.TrimSpace(line), o.dropNext)
		if drop {
			o.dropNext = ""
		}
		stall := o.stallNext != "" && strings.HasPrefix(strings.TrimSpace(line), o.stallNext)
		if stall {
			o.stallNext = ""
		}
		o.mu.Unlock()
		if drop {
			return
		}
		if stall {
			// The link stays up and nothing more is ever printed.
			<-ctx.Done()
			return
		}
		if r := s.peekParam(line); !r && !s.sleepFor(ctx, lat) {
			return
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		o.mu.Lock()
		r := s.dispatch(line, len(p))
		o.mu.Unlock()
		if r.param != "" && !s.noSmart {
			if s.write(r.param+" ") != nil {
				return
			}
			if _, err := s.readLine(true); err != nil {
				return
			}
			s.count()
			// The device works on the command once it has its Enter.
			if !s.sleep(ctx) {
				return
			}
			s.write("\n  Command:\n          " + line + "\n")
		}
		if r.confirm != "" {
			if s.write(r.confirm) != nil {
				return
			}
			ans, err := s.readLine(true)
			if err != nil {
				return
			}
			s.count()
			if !strings.HasPrefix(strings.ToLower(strings.TrimSpace(ans)), "y") {
				continue
			}
		}
		if r.run == nil {
			continue
		}
		o.mu.Lock()
		out := r.run()
		o.mu.Unlock()
		if !s.output(out) {
			return
		}
	}
}

// sleep waits the configured latency; false when the server stops.
func (s *session) sleep(ctx context.Context) bool {
	s.olt.mu.Lock()
	lat := s.olt.latency
	s.olt.mu.Unlock()
	return s.sleepFor(ctx, lat)
}

func (s *session) sleepFor(ctx context.Context, lat time.Duration) bool {
	if lat <= 0 {
		return true
	}
	select {
	case <-time.After(lat):
		return true
	case <-ctx.Done():
		return false
	}
}

// peekParam reports whether line will be answered with a parameter
// prompt first (in smart mode): the latency then falls after the Enter.
func (s *session) peekParam(line string) bool {
	if s.noSmart || strings.TrimSpace(line) == "" {
		return false
	}
	s.olt.mu.Lock()
	defer s.olt.mu.Unlock()
	return s.dispatch(strings.TrimSpace(line), 0).param != ""
}

func (s *session) count() {
	s.olt.mu.Lock()
	s.olt.commands++
	s.olt.mu.Unlock()
}

// output prints an answer: alarms spliced into the middle when due, and a
// More prompt after every screenful when paging is on.
func (s *session) output(out string) bool {
	if out == "" {
		return true
	}
	o := s.olt
	o.mu.Lock()
	paging, pageLines := o.paging && !s.noPaging, o.cfg.PageLines
	var alarms []string
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(o.pending) > 0 || (o.alarms && len(lines) >= 4) {
		alarms = o.pending
		o.pending = nil
		if len(alarms) == 0 {
			alarms = []string{o.alarmText("The ONT optical power is abnormal", "FrameID: 0, SlotID: 1, PortID: 0, ONT ID: 0")}
		}
	}
	o.mu.Unlock()
	if len(alarms) > 0 {
		mid := len(lines) / 2
		var al []string
		for _, a := range alarms {
			al = append(al, strings.Split(strings.TrimSuffix(a, "\n"), "\n")...)
		}
		lines = append(lines[:mid:mid], append(al, lines[mid:]...)...)
	}
	var b strings.Builder
	n := 0
	for i, l := range lines {
		b.WriteString(l + "\n")
		n++
		if paging && n >= pageLines-1 && i < len(lines)-1 {
			if s.write(b.String()+MoreMarker) != nil {
				return false
			}
			b.Reset()
			n = 0
			key, err := s.in.ReadByte()
			if err != nil {
				return false
			}
			s.count()
			if key == 'q' || key == 'Q' {
				return s.write("\n") == nil
			}
			// The erase sequence the real OLT prints over the prompt; the
			// next row follows on the same screen line.
			b.WriteString("\x1b[37D" + strings.Repeat(" ", 37) + "\x1b[37D")
		}
	}
	return s.write(b.String()) == nil
}

// MoreMarker is the paging prompt.
const MoreMarker = "---- More ( Press 'Q' to break ) ----"

// tokens splits a command line into words, keeping quoted strings whole
// (without their quotes).
func tokens(line string) []string {
	var out []string
	var cur strings.Builder
	inQ, has := false, false
	for _, r := range line {
		switch {
		case r == '"':
			inQ = !inQ
			has = true
		case (r == ' ' || r == '\t') && !inQ:
			if has {
				out = append(out, cur.String())
				cur.Reset()
				has = false
			}
		default:
			cur.WriteRune(r)
			has = true
		}
	}
	if has {
		out = append(out, cur.String())
	}
	return out
}
