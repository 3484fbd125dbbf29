package versions_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"

	"routerd.dev/services/system/confdoc"
	"routerd.dev/services/system/versions"
	"routerd.dev/shared/store"
	"routerd.dev/shared/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// A document larger than one etcd request (here 6 MB that compress to
// about 3 MB: several pieces) is stored compressed in pieces and read back
// whole; a blob of the first releases (one uncompressed key) still reads.
func TestLargeDocumentAndLegacyBlob(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	st := store.New(env.KV, "system")
	vs := versions.New(st, nil)
	raw := make([]byte, 3<<20)
	rand.Read(raw)
	big := hex.EncodeToString(raw)
	docs := confdoc.Docs{"etc/big.json": big, "etc/small.json": "{}\n"}
	rec, err := vs.Save(ctx, docs, "tester", "large", false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vs.Save(ctx, docs, "tester", "again", false); err != nil { // the blobs exist: skipped
		t.Fatal(err)
	}
	got, err := vs.Documents(ctx, rec)
	if err != nil || got["etc/big.json"] != big || got["etc/small.json"] != "{}\n" {
		t.Fatalf("read back: %v (%d bytes)", err, len(got["etc/big.json"]))
	}
	legacy := "{\"plans\": []}\n"
	f := versions.File{Path: "etc/plans.json", Bytes: len(legacy), Digest: confdoc.FileDigest(legacy)}
	if _, err := env.KV.Put(ctx, st.Key("blobs", f.Digest), legacy); err != nil {
		t.Fatal(err)
	}
	if c, err := vs.Document(ctx, f); err != nil || c != legacy {
		t.Fatalf("legacy blob: %q %v", c, err)
	}
	if _, err := env.KV.Put(ctx, st.Key("blobs", f.Digest), "tampered"); err != nil {
		t.Fatal(err)
	}
	if _, err := vs.Document(ctx, f); err == nil {
		t.Fatal("a blob that does not match its digest was read")
	}
}
