// Package sim is a simulator of Huawei SmartAX GPON OLTs (MA5800, MA5608T,
// MA5683T) that serves their command line over telnet and SSH on loopback.
// Each simulated OLT keeps a state model (boards, PON ports, autofind,
// registered ONTs, VLANs and uplink tagging, profiles, traffic tables,
// service-ports, running configuration, moving counters and optical
// readings) and prints what a real one prints, with the layouts of the
// captures in shared/olt-transcripts: column padding, the parameter prompt
// and `Command:` echo, paging, CRLF, errors and, when switched on,
// asynchronous alarm blocks in the middle of output.
//
// Tests and the router's lab mode start it in-process with Start; the
// oltsim program serves it from flags.
package sim

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// Config describes the simulated OLTs.
type Config struct {
	// OLTs to serve; empty means one OLT with defaults.
	OLTs []OLTConfig
	// Addr is the host to listen on, e.g. "127.0.0.1" (the default); every
	// OLT gets its own telnet and SSH port, chosen by the kernel.
	Addr string
	// Logger receives connection events; nil discards them.
	Logger *slog.Logger
	// Now is the clock readings and timestamps are based on; nil means
	// time.Now.
	Now func() time.Time
}

// OLTConfig describes one simulated OLT.
type OLTConfig struct {
	// Name is the sysname shown in the prompt, e.g. "OLT1" (default "OLT<n>").
	Name string
	// Model picks firmware-dependent answers; default MA5800.
	Model Model
	// User and Pass are the accepted credentials; default "root"/"admin".
	User, Pass string
	// NoPaging starts with paging off (it can be switched at run time).
	NoPaging bool
	// PageLines is the screen length; default 24 lines.
	PageLines int
	// Alarms prints an alarm block in the middle of every output of four
	// lines or more.
	Alarms bool
	// Latency is added before every answer, to model a slow device.
	Latency time.Duration
	// KeyboardInteractive makes SSH ask "User password:" by
	// keyboard-interactive authentication only, as MA5800 firmware does.
	KeyboardInteractive bool
	// Autofind seeds ONTs waiting to be registered.
	Autofind []AutofindONT
	// LegacySSH makes the SSH server offer only what older firmware
	// offers: diffie-hellman-group1-sha1, CBC ciphers, hmac-sha1.
	LegacySSH bool
	// Banner is printed after a successful login, before the first
	// prompt (operators' legal notices: "unauthorised access is invalid",
	// "accounts are locked after 3 attempts").
	Banner string
	// PromptIndent is printed before every prompt (blanks some firmware
	// leaves after a cleared line).
	PromptIndent string
	// LogCommands keeps every command line received, with its session and
	// time (CommandLog).
	LogCommands bool
}

// Server is a running simulator.
type Server struct {
	olts   []*OLT
	log    *slog.Logger
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// OLT is one simulated OLT: its listeners, settings and state.
type OLT struct {
	cfg     OLTConfig
	now     func() time.Time
	log     *slog.Logger
	telnet  net.Listener
	sshL    net.Listener
	sshConf *ssh.ServerConfig

	mu         sync.Mutex // guards everything below and st
	st         *state
	paging     bool
	alarms     bool
	latency    time.Duration
	pending    []string // alarms to print in the next output
	typing     []typingAlarm
	alarmSeq   int
	longAlarms bool
	model      Model
	commands   int
	conns      map[net.Conn]bool
	stallNext  string
	sessionSeq int
	cmdLog     []CommandLog
	dropNext   string // command prefix after which the connection is dropped
	idle       map[*session]bool
	received   map[string]int
}

// Start starts the simulated OLTs and returns when they listen. They stop
// when ctx ends or Close is called.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if len(cfg.OLTs) == 0 {
		cfg.OLTs = []OLTConfig{{}}
	}
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	signer, err := ssh.NewSignerFromKey(key)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &Server{log: log, cancel: cancel}
	for i, oc := range cfg.OLTs {
		if oc.Name == "" {
			oc.Name = fmt.Sprintf("OLT%d", i+1)
		}
		if oc.Model == "" {
			oc.Model = MA5800
		}
		if oc.User == "" {
			oc.User, oc.Pass = "root", "admin"
		}
		if oc.PageLines <= 0 {
			oc.PageLines = 24
		}
		o := &OLT{cfg: oc, now: cfg.Now, log: log.With("olt", oc.Name), st: newState(oc.Name, cfg.Now()),
			paging: !oc.NoPaging, alarms: oc.Alarms, latency: oc.Latency, model: oc.Model, conns: map[net.Conn]bool{}, received: map[string]int{}, idle: map[*session]bool{}}
		for _, a := range oc.Autofind {
			o.PlugONT(a)
		}
		o.sshConf = &ssh.ServerConfig{PasswordCallback: func(c ssh.ConnMetadata, pass []byte) (*ssh.Permissions, error) {
			if c.User() == o.cfg.User && string(pass) == o.cfg.Pass {
				return nil, nil
			}
			return nil, errors.New("password rejected")
		}}
		if oc.KeyboardInteractive {
			o.sshConf.PasswordCallback = nil
			o.sshConf.KeyboardInteractiveCallback = func(c ssh.ConnMetadata, ask ssh.KeyboardInteractiveChallenge) (*ssh.Permissions, error) {
				ans, err := ask("User Authentication", "", []string{"User password:"}, []bool{false})
				if err == nil && len(ans) == 1 && c.User() == o.cfg.User && ans[0] == o.cfg.Pass {
					return nil, nil
				}
				return nil, errors.New("password rejected")
			}
		}
		if oc.LegacySSH {
			// As MA5600T/MA5683T firmware: nothing newer offered.
			o.sshConf.Config = ssh.Config{KeyExchanges: []string{"diffie-hellman-group1-sha1"},
				Ciphers: []string{"aes128-cbc", "3des-cbc"}, MACs: []string{"hmac-sha1"}}
		}
		o.sshConf.AddHostKey(signer)
		if o.telnet, err = net.Listen("tcp", net.JoinHostPort(cfg.Addr, "0")); err != nil {
			s.Close()
			return nil, err
		}
		if o.sshL, err = net.Listen("tcp", net.JoinHostPort(cfg.Addr, "0")); err != nil {
			o.telnet.Close()
			s.Close()
			return nil, err
		}
		s.olts = append(s.olts, o)
		s.wg.Add(2)
		go func() { defer s.wg.Done(); o.serve(ctx, o.telnet, o.serveTelnet) }()
		go func() { defer s.wg.Done(); o.serve(ctx, o.sshL, o.serveSSH) }()
	}
	go func() { <-ctx.Done(); s.closeListeners() }()
	return s, nil
}

func (s *Server) closeListeners() {
	for _, o := range s.olts {
		o.telnet.Close()
		o.sshL.Close()
		o.mu.Lock()
		for c := range o.conns {
			c.Close()
		}
		o.mu.Unlock()
	}
}

// Close stops every OLT, drops open sessions and waits for the listeners.
func (s *Server) Close() error {
	s.cancel()
	s.closeListeners()
	s.wg.Wait()
	return nil
}

// OLTs returns the simulated OLTs in the order of Config.OLTs.
func (s *Server) OLTs() []*OLT { return s.olts }

// OLT returns the i-th simulated OLT.
func (s *Server) OLT(i int) *OLT { return s.olts[i] }

// TelnetAddr is the telnet address of the first OLT.
func (s *Server) TelnetAddr() string { return s.olts[0].TelnetAddr() }

// SSHAddr is the SSH address of the first OLT.
func (s *Server) SSHAddr() string { return s.olts[0].SSHAddr() }

// TelnetAddr is the OLT's telnet address (host:port).
func (o *OLT) TelnetAddr() string { return o.telnet.Addr().String() }

// SSHAddr is the OLT's SSH address (host:port).
func (o *OLT) SSHAddr() string { return o.sshL.Addr().String() }

// Name is the OLT's current sysname.
func (o *OLT) Name() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.st.sysname
}

// PlugONT makes an ONT appear in the autofind list of its PON port, as if
// a technician had just connected it.
func (o *OLT) PlugONT(a AutofindONT) {
	o.mu.Lock()
	defer o.mu.Unlock()
	a.SN = strings.ToUpper(a.SN)
	if a.Seen.IsZero() {
		a.Seen = o.now()
	}
	if a.EquipmentID == "" {
		a.EquipmentID = "EG8145V5"
	}
	if a.Vendor == "" {
		a.Vendor = vendorOf(a.SN)
	}
	if _, reg := o.st.ontBySN(a.SN); reg != nil {
		reg.online = true
		return
	}
	for _, x := range o.st.autofind {
		if x.SN == a.SN {
			return
		}
	}
	o.st.autofind = append(o.st.autofind, a)
	if !o.alarms {
		return
	}
	o.pending = append(o.pending, o.alarmText("The ONT is discovered by autofind",
		fmt.Sprintf("F/S/P: %s, SN: %s", a.Port, a.SN)))
}

func vendorOf(sn string) string {
	if len(sn) < 8 {
		return "HWTC"
	}
	var b []byte
	for i := 0; i < 8; i += 2 {
		var c byte
		fmt.Sscanf(sn[i:i+2], "%02X", &c)
		if c < 'A' || c > 'Z' {
			return "HWTC"
		}
		b = append(b, c)
	}
	return string(b)
}

// SetPaging switches the `---- More ----` paging on or off.
func (o *OLT) SetPaging(on bool) { o.mu.Lock(); o.paging = on; o.mu.Unlock() }

// SetAlarms switches alarm blocks in the middle of outputs on or off.
func (o *OLT) SetAlarms(on bool) { o.mu.Lock(); o.alarms = on; o.mu.Unlock() }

// InjectAlarm queues one alarm block to print in the middle of the next
// output.
func (o *OLT) InjectAlarm(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pending = append(o.pending, o.alarmText(name, "FrameID: 0, SlotID: 1, PortID: 0"))
}

// TypingAlarm makes the OLT print an alarm block while the next command
// line is being echoed, after its first at characters (0: before the
// echo), then reprint the prompt and the part already typed and go on
// echoing, as a real OLT does (netmiko issue 3559).
func (o *OLT) TypingAlarm(name string, at int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.typing = append(o.typing, typingAlarm{name: name, at: at})
}

type typingAlarm struct {
	name string
	at   int
}

// SetLongAlarms makes every alarm block several kilobytes long (an advice
// field of many lines).
func (o *OLT) SetLongAlarms(on bool) { o.mu.Lock(); o.longAlarms = on; o.mu.Unlock() }

// AsyncAlarm prints an alarm block at once to every session waiting at
// its prompt, and reprints the prompt after it, as a real OLT does between
// commands.
func (o *OLT) AsyncAlarm(name string) {
	o.mu.Lock()
	text := o.alarmText(name, "FrameID: 0, SlotID: 1, PortID: 0, ONT ID: 0")
	var idle []*session
	for s := range o.idle {
		idle = append(idle, s)
	}
	o.mu.Unlock()
	for _, s := range idle {
		s.write(text + o.cfg.PromptIndent + s.prompt())
	}
}

// DropSessions closes every open connection, as an OLT's idle logout or
// reboot does.
func (o *OLT) DropSessions() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for c := range o.conns {
		c.Close()
	}
}

// Sessions is the number of open connections.
func (o *OLT) Sessions() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.conns)
}

// SetONTOnline switches a registered ONT's link (fibre plugged or not).
func (o *OLT) SetONTOnline(sn string, online bool) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, x := o.st.ontBySN(strings.ToUpper(sn))
	if x == nil {
		return false
	}
	x.online = online
	if !online {
		x.downCause = "LOS"
	}
	return true
}

// PowerOffONT takes a registered ONT offline as a subscriber switching it
// off does: the OLT records a dying gasp.
func (o *OLT) PowerOffONT(sn string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, x := o.st.ontBySN(strings.ToUpper(sn))
	if x == nil {
		return false
	}
	x.online, x.downCause = false, "dying-gasp"
	return true
}

// SetLatency sets the delay before every answer.
func (o *OLT) SetLatency(d time.Duration) { o.mu.Lock(); o.latency = d; o.mu.Unlock() }

// SetModel switches the firmware whose answers are reproduced.
func (o *OLT) SetModel(m Model) { o.mu.Lock(); o.model = m; o.mu.Unlock() }

// DropAfter makes the OLT close the connection after it receives the next
// command starting with prefix, without answering: a link lost mid-write.
func (o *OLT) DropAfter(prefix string) { o.mu.Lock(); o.dropNext = prefix; o.mu.Unlock() }

// CommandLog is one command line an OLT received (with LogCommands).
type CommandLog struct {
	At      time.Time
	Session int // the session's number on this OLT, from 1
	Line    string
}

// CommandLog returns the commands received so far, in order.
func (o *OLT) CommandLog() []CommandLog {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]CommandLog(nil), o.cmdLog...)
}

// StallOn makes the next command starting with prefix never answered,
// the connection left open (a hung OLT process).
func (o *OLT) StallOn(prefix string) { o.mu.Lock(); o.stallNext = prefix; o.mu.Unlock() }

// Commands is the number of command lines the OLT has received (the round
// trips a client cost it), counting parameter-prompt Enters and answers to
// y/n questions.
func (o *OLT) Commands() int { o.mu.Lock(); defer o.mu.Unlock(); return o.commands }

// Received counts the command lines received that start with prefix.
func (o *OLT) Received(prefix string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for cmd, c := range o.received {
		if strings.HasPrefix(cmd, prefix) {
			n += c
		}
	}
	return n
}

// ONT is a registered ONT as tests see it.
type ONT struct {
	Port, SN, Description  string
	ID, LineProfile, Srv   int
	Active, Online         bool
	ServicePorts           []int
	ServicePortVLANs       []int
	NativeVLANs            map[int]int
	LineProfileInRunConfig bool
}

// ONTs returns the registered ONTs, for tests to check what a driver did.
func (o *OLT) ONTs() []ONT {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []ONT
	for _, name := range sortedPorts(o.st.ports) {
		p := o.st.ports[name]
		for _, id := range sortedKeys(p.onts) {
			x := p.onts[id]
			t := ONT{Port: name, SN: x.sn, Description: x.desc, ID: id, LineProfile: x.lineProfile, Srv: x.srvProfile,
				Active: x.active, Online: x.online, NativeVLANs: map[int]int{}}
			for e, v := range x.natives {
				t.NativeVLANs[e] = v
			}
			for _, i := range o.st.servicePortsOf(name, id) {
				t.ServicePorts = append(t.ServicePorts, i)
				t.ServicePortVLANs = append(t.ServicePortVLANs, o.st.sps[i].vlan)
			}
			out = append(out, t)
		}
	}
	return out
}

// AddServicePort creates a service-port directly in the state, as another
// operator sharing the OLT would; it returns the index.
func (o *OLT) AddServicePort(vlanID int, pon string, ontID, gem, userVLAN int) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	i := o.st.nextServicePort()
	o.st.sps[i] = &servicePort{vlan: vlanID, pon: pon, ont: ontID, gem: gem, userVLAN: userVLAN, transform: "translate", in: 6, out: 6}
	if o.st.vlans[vlanID] == nil {
		o.st.vlans[vlanID] = &vlan{typ: "smart", attr: "common"}
	}
	return i
}

// RunningConfig returns what `display current-configuration` prints.
func (o *OLT) RunningConfig() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.renderConfig("")
}

// alarmText is an alarm block as real OLTs print it (the capture of
// netmiko issue 3559): a numbered header with a date, a blank line, the
// alarm line broken where it passes the screen's width (its time stamp
// continues at the start of the next line), fields whose values wrap onto
// lines indented under the value, and the end marker. With long alarms
// the advice runs to several kilobytes. o.mu is held.
func (o *OLT) alarmText(name, params string) string {
	o.alarmSeq++
	now := o.now()
	stamp := now.Format("02/01/2006 15:04:05-07:00")
	var b strings.Builder
	fmt.Fprintf(&b, "\n  ! %d [%s]:\n\n", o.alarmSeq, stamp)
	line := fmt.Sprintf("  ALARM %d FAULT WARNING 0x2e112007 SERVICE QUALITY %s", 10000+o.alarmSeq, stamp)
	if i := strings.LastIndexByte(line[:alarmWidth], ' '); len(line) > alarmWidth && i > 0 {
		line = line[:i+1] + "\n" + line[i+1:]
	}
	b.WriteString(line + "\n")
	advice := "(1) Check tributary optical fiber connection and backbone optical fiber orderly, clean the fiber connector and replace the fiber if necessary (2) Ensure that the optical attenuation of the optical path is normal (3) Reset the ONT or replace the ONT"
	if o.longAlarms {
		var a []string
		for i := 1; i <= 40; i++ {
			a = append(a, fmt.Sprintf("(%d) Check the optical splitter and the connectors of branch %d, measure the received power and compare it with the budget of the optical distribution network", i, i))
		}
		advice = strings.Join(a, " ")
	}
	for _, f := range [][2]string{{"ALARM NAME", name}, {"SRVEFF", "SA"}, {"PARAMETERS", params},
		{"DESCRIPTION", "The OLT cannot receive expected optical signals from the ONT in four consecutive frames"},
		{"CAUSE", "(1) The fiber is broken (2) The quality of the optical path is poor (3) The ONT hardware fails"},
		{"ADVICE", advice}} {
		b.WriteString(wrapField(f[0], f[1]))
	}
	b.WriteString("  --- END\n\n")
	return b.String()
}

// alarmWidth is where the OLT breaks the lines of an alarm.
const alarmWidth = 78

// wrapField prints `  NAME        : value`, the value wrapped at word
// boundaries onto lines indented under it, each piece keeping its
// trailing blank as the device does.
func wrapField(name, value string) string {
	head := fmt.Sprintf("  %-12s: ", name)
	indent := strings.Repeat(" ", len(head))
	var b strings.Builder
	cur := head
	for _, w := range strings.Fields(value) {
		if len(cur)+len(w) > alarmWidth && strings.TrimSpace(cur) != strings.TrimSpace(head) && cur != indent {
			b.WriteString(cur + "\n")
			cur = indent
		}
		cur += w + " "
	}
	b.WriteString(strings.TrimRight(cur, " ") + "\n")
	return b.String()
}

func (o *OLT) serve(ctx context.Context, l net.Listener, handle func(context.Context, net.Conn)) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		o.mu.Lock()
		o.conns[c] = true
		o.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				o.mu.Lock()
				delete(o.conns, c)
				o.mu.Unlock()
				c.Close()
			}()
			handle(ctx, c)
		}()
	}
}
