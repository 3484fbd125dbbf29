package route

import (
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		in      Input
		want    Route
		wantErr string // field named in the error, "" for success
	}{
		{"v4 via", Input{Prefix: "10.0.0.0/8", Via: "192.0.2.1"}, Route{Prefix: "10.0.0.0/8", Via: "192.0.2.1", Family: "ipv4"}, ""},
		{"v6 via dev", Input{Prefix: "2001:db8:1::/48", Via: "2001:db8::2", Dev: "eth0"}, Route{Prefix: "2001:db8:1::/48", Via: "2001:db8::2", Dev: "eth0", Family: "ipv6"}, ""},
		{"default v4", Input{Prefix: "default", Via: "192.0.2.1"}, Route{Prefix: "default", Via: "192.0.2.1", Family: "ipv4"}, ""},
		{"default v6 by gateway", Input{Prefix: "DEFAULT", Via: "fe80::1", Dev: "eth0"}, Route{Prefix: "default", Via: "fe80::1", Dev: "eth0", Family: "ipv6"}, ""},
		{"zero prefix is default", Input{Prefix: "0.0.0.0/0", Dev: "eth0"}, Route{Prefix: "default", Dev: "eth0", Family: "ipv4"}, ""},
		{"bare address is a host route", Input{Prefix: "198.51.100.7", Dev: "eth0"}, Route{Prefix: "198.51.100.7/32", Dev: "eth0", Family: "ipv4"}, ""},
		{"no prefix", Input{Via: "192.0.2.1"}, Route{}, "prefix"},
		{"bad prefix", Input{Prefix: "10.0.0/8", Via: "192.0.2.1"}, Route{}, "prefix"},
		{"host bits", Input{Prefix: "10.1.2.3/8", Via: "192.0.2.1"}, Route{}, "prefix"},
		{"neither via nor dev", Input{Prefix: "10.0.0.0/8"}, Route{}, "via"},
		{"bad via", Input{Prefix: "10.0.0.0/8", Via: "192.0.2"}, Route{}, "via"},
		{"family mismatch", Input{Prefix: "10.0.0.0/8", Via: "2001:db8::1"}, Route{}, "via"},
		{"link-local needs dev", Input{Prefix: "2001:db8::/32", Via: "fe80::1"}, Route{}, "dev"},
		{"bad dev", Input{Prefix: "10.0.0.0/8", Dev: "eth0/../x"}, Route{}, "dev"},
		{"dev too long", Input{Prefix: "10.0.0.0/8", Dev: "abcdefghijklmnop"}, Route{}, "dev"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := parse(tt.in)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("parse(%+v): want an error about %s", tt.in, tt.wantErr)
				}
				if f := fieldOf(err); f != tt.wantErr {
					t.Fatalf("parse(%+v): error %q names field %q, want %q", tt.in, err, f, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parse(%+v): %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("parse(%+v) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}
