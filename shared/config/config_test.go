package config

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// The example file is the documentation of every key: it must load, and
// name every key the Config type has.
func TestExampleDocumentsEveryKey(t *testing.T) {
	const path = "../../deploy/routerd.example.yaml"
	c, err := Load(path)
	if err != nil {
		t.Fatalf("example does not load: %v", err)
	}
	if c.ListenPort != 8880 || c.PDLen != 64 {
		t.Errorf("example: listen_port %d pd_len %d", c.ListenPort, c.PDLen)
	}
	raw, _ := os.ReadFile(path)
	typ := reflect.TypeOf(Config{})
	for i := 0; i < typ.NumField(); i++ {
		key := strings.Split(typ.Field(i).Tag.Get("json"), ",")[0]
		if !strings.Contains(string(raw), "\n"+key+":") {
			t.Errorf("key %s is not in the example file", key)
		}
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	c := Default()
	c.ListenIP, c.ListenPort, c.PDSlice, c.LogLevel = "nope", 70000, 3, "loud"
	c.Services = []string{"teleport"}
	err := c.Validate()
	if err == nil {
		t.Fatal("want errors")
	}
	for _, want := range []string{"listen_ip", "listen_port", "pd_slice", "log_level", "teleport"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %s: %v", want, err)
		}
	}
}

func TestUnknownKeyRefused(t *testing.T) {
	p := t.TempDir() + "/c.yaml"
	os.WriteFile(p, []byte("listen_port: 8880\nlisten_prot: 1\n"), 0o600)
	if _, err := Load(p); err == nil {
		t.Fatal("a misspelt key must be refused")
	}
}
