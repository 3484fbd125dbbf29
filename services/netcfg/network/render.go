package network

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// FilePrefix begins the name of every file routerd renders into the OS
// network directory; files without it are the operator's and are never
// written or removed.
const FilePrefix = "10-routerd-"

// Files are rendered OS network files: file name to content.
type Files map[string]string

// VLANLink is a managed VLAN as the renderer needs it (the VLANs are
// kept by the VLAN book, not the network document; their files are
// rendered with the document's so that a router boots with both).
type VLANLink struct {
	Name, Parent, Protocol string
	ID                     int
	Up                     bool
}

// Render renders c as systemd-networkd files (the format a Debian router
// boots with, /etc/systemd/network): a .netdev and a .network per bond,
// a .network per port (a member names its bond), with the addresses
// stored for each interface (addrs, by interface name).
func Render(c Config, version string, addrs map[string][]string, vlans []VLANLink) Files {
	c = Normal(c)
	head := "# Rendered by routerd from the network document (version " + version + ").\n# Changes go through POST /network/apply; edits here are overwritten.\n"
	out := Files{}
	members := Members(c)
	children := map[string][]string{}
	for _, v := range vlans {
		children[v.Parent] = append(children[v.Parent], v.Name)
	}
	for _, v := range vlans {
		var nd strings.Builder
		nd.WriteString(head + "\n[NetDev]\nName=" + v.Name + "\nKind=vlan\n\n[VLAN]\n")
		fmt.Fprintf(&nd, "Id=%d\n", v.ID)
		if v.Protocol == "802.1ad" {
			nd.WriteString("Protocol=802.1ad\n")
		}
		out[FilePrefix+v.Name+".netdev"] = nd.String()
		out[FilePrefix+v.Name+".network"] = network(head, v.Name, "", nil, v.Up, "", addrs[v.Name], children[v.Name])
	}
	for _, b := range c.Bonds {
		var nd strings.Builder
		nd.WriteString(head + "\n[NetDev]\nName=" + b.Name + "\nKind=bond\n")
		if b.MTU != nil {
			fmt.Fprintf(&nd, "MTUBytes=%d\n", *b.MTU)
		}
		nd.WriteString("\n[Bond]\nMode=" + b.Mode + "\n")
		if v, ok := b.Params["lacp-rate"]; ok {
			fmt.Fprintf(&nd, "LACPTransmitRate=%v\n", v)
		}
		if v, ok := b.Params["transmit-hash-policy"]; ok {
			fmt.Fprintf(&nd, "TransmitHashPolicy=%v\n", v)
		}
		if v, ok := b.Params["mii-monitor-interval"]; ok {
			fmt.Fprintf(&nd, "MIIMonitorSec=%vms\n", v)
		}
		out[FilePrefix+b.Name+".netdev"] = nd.String()
		out[FilePrefix+b.Name+".network"] = network(head, b.Name, "", nil, true, "", addrs[b.Name], children[b.Name])
	}
	for _, p := range c.Ports {
		out[FilePrefix+p.Name+".network"] = network(head, p.Name, p.MAC, p.MTU, p.Up, members[p.Name], addrs[p.Name], children[p.Name])
	}
	return out
}

func network(head, name, mac string, mtu *int, up bool, bond string, addrs, vlans []string) string {
	var sb strings.Builder
	sb.WriteString(head + "\n[Match]\nName=" + name + "\n")
	if mac != "" {
		sb.WriteString("MACAddress=" + mac + "\n")
	}
	sb.WriteString("\n[Link]\n")
	if mtu != nil && bond == "" {
		fmt.Fprintf(&sb, "MTUBytes=%d\n", *mtu)
	}
	sb.WriteString("ActivationPolicy=" + map[bool]string{true: "up", false: "down"}[up] + "\nRequiredForOnline=no\n")
	sb.WriteString("\n[Network]\n")
	if bond != "" {
		sb.WriteString("Bond=" + bond + "\n")
	} else {
		sb.WriteString("LinkLocalAddressing=ipv6\n")
		as := append([]string{}, addrs...)
		sort.Strings(as)
		for _, a := range as {
			sb.WriteString("Address=" + a + "\n")
		}
	}
	vs := append([]string{}, vlans...)
	sort.Strings(vs)
	for _, v := range vs {
		sb.WriteString("VLAN=" + v + "\n")
	}
	return sb.String()
}

// known lists the sections and keys the renderer writes: Check refuses
// anything else.
var known = map[string]map[string]bool{
	"NetDev":  {"Name": true, "Kind": true, "MTUBytes": true},
	"VLAN":    {"Id": true, "Protocol": true},
	"Bond":    {"Mode": true, "LACPTransmitRate": true, "TransmitHashPolicy": true, "MIIMonitorSec": true},
	"Match":   {"Name": true, "MACAddress": true},
	"Link":    {"MTUBytes": true, "ActivationPolicy": true, "RequiredForOnline": true},
	"Network": {"Bond": true, "Address": true, "LinkLocalAddressing": true, "VLAN": true},
}

type ref struct{ file, bond string }

// Check reads rendered files back the way systemd-networkd would: every
// line a section, a comment or a known key=value of its section; every
// .netdev has a name and kind; every Bond= names a rendered bond; no two
// files match the same interface.
func Check(fs Files) error {
	bonds := map[string]bool{}
	vlanDevs := map[string]bool{}
	var vlanRefs []ref
	matches := map[string]string{}
	var refs []ref
	for _, name := range sortedKeys(fs) {
		if !strings.HasPrefix(name, FilePrefix) || strings.ContainsAny(name, "/\x00") {
			return fmt.Errorf("%s: not a routerd file name", name)
		}
		sections, err := parse(fs[name])
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		switch filepath.Ext(name) {
		case ".netdev":
			nd := sections["NetDev"]
			switch {
			case nd["Name"] == "":
				return fmt.Errorf("%s: [NetDev] needs Name", name)
			case nd["Kind"] == "bond":
				if !contains(Modes, sections["Bond"]["Mode"]) {
					return fmt.Errorf("%s: bond mode %q", name, sections["Bond"]["Mode"])
				}
				bonds[nd["Name"]] = true
			case nd["Kind"] == "vlan":
				if id := sections["VLAN"]["Id"]; id == "" || strings.Trim(id, "0123456789") != "" {
					return fmt.Errorf("%s: [VLAN] needs a numeric Id", name)
				}
				vlanDevs[nd["Name"]] = true
			default:
				return fmt.Errorf("%s: Kind %q: want bond or vlan", name, nd["Kind"])
			}
		case ".network":
			n := sections["Match"]["Name"]
			if n == "" {
				return fmt.Errorf("%s: [Match] needs Name", name)
			}
			if other, ok := matches[n]; ok {
				return fmt.Errorf("%s and %s both match %s", other, name, n)
			}
			matches[n] = name
			if b := sections["Network"]["Bond"]; b != "" {
				refs = append(refs, ref{name, b})
			}
			for _, v := range vlanLines(fs[name]) {
				vlanRefs = append(vlanRefs, ref{name, v})
			}
		default:
			return fmt.Errorf("%s: not a .netdev or .network file", name)
		}
	}
	for _, r := range refs {
		if !bonds[r.bond] {
			return fmt.Errorf("%s: Bond=%s names no rendered bond", r.file, r.bond)
		}
	}
	for _, r := range vlanRefs {
		if !vlanDevs[r.bond] {
			return fmt.Errorf("%s: VLAN=%s names no rendered VLAN", r.file, r.bond)
		}
	}
	return nil
}

// vlanLines are the VLAN= values of a .network file (a key that repeats).
func vlanLines(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "VLAN="); ok {
			out = append(out, v)
		}
	}
	return out
}

func parse(text string) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	sec := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	for ln := 1; sc.Scan(); ln++ {
		l := strings.TrimSpace(sc.Text())
		switch {
		case l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, ";"):
		case strings.HasPrefix(l, "[") && strings.HasSuffix(l, "]"):
			sec = l[1 : len(l)-1]
			if known[sec] == nil {
				return nil, fmt.Errorf("line %d: unknown section [%s]", ln, sec)
			}
			if out[sec] == nil {
				out[sec] = map[string]string{}
			}
		default:
			k, v, ok := strings.Cut(l, "=")
			if !ok || sec == "" || !known[sec][k] || v == "" {
				return nil, fmt.Errorf("line %d: %q is not a known key of [%s]", ln, l, sec)
			}
			out[sec][k] = v
		}
	}
	return out, nil
}

// ReadDir reads the routerd files of dir (none when it does not exist).
func ReadDir(dir string) (Files, error) {
	ents, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return Files{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := Files{}
	for _, e := range ents {
		if e.Type().IsRegular() && strings.HasPrefix(e.Name(), FilePrefix) && !strings.HasSuffix(e.Name(), ".tmp") {
			raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				return nil, err
			}
			out[e.Name()] = string(raw)
		}
	}
	return out, nil
}

// WriteDir makes the routerd files of dir exactly fs: each written to a
// temporary name, synced and renamed; routerd files not in fs removed;
// other files untouched.
func WriteDir(dir string, fs Files) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, text := range fs {
		if err := WriteFileSync(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			return err
		}
	}
	have, err := ReadDir(dir)
	if err != nil {
		return err
	}
	for name := range have {
		if _, ok := fs[name]; !ok {
			if err := os.Remove(filepath.Join(dir, name)); err != nil && !os.IsNotExist(err) {
				return err
			}
		}
	}
	return syncDir(dir)
}

// WriteFileSync writes a file so that it is whole on disk when it
// returns: a temporary file, synced, renamed over, the directory synced.
func WriteFileSync(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
