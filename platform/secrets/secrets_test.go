package secrets

import (
	"strings"
	"testing"
)

const (
	keyA = "k1:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
	keyB = "k2:ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA="
)

func TestASealedValueOpensOnlyWithItsKeyAndItsRow(t *testing.T) {
	old, err := Parse(keyA)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := old.Seal("whsec_plain", "row-1/secret")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(sealed, "v1:k1:") || strings.Contains(sealed, "whsec_plain") {
		t.Fatalf("sealed = %q", sealed)
	}
	rotated, err := Parse(keyB + "," + keyA) // k2 seals now, k1 still opens
	if err != nil {
		t.Fatal(err)
	}
	if got, err := rotated.Open(sealed, "row-1/secret"); err != nil || got != "whsec_plain" {
		t.Fatalf("open = %q, %v", got, err)
	}
	if rotated.Current(sealed) || !rotated.Current("") {
		t.Fatal("a value under k1 must need a rewrite once k2 seals")
	}
	if _, err := rotated.Open(sealed, "row-2/secret"); err == nil {
		t.Fatal("a value moved to another row opened")
	}
	onlyB, _ := Parse(keyB)
	if _, err := onlyB.Open(sealed, "row-1/secret"); err == nil || !strings.Contains(err.Error(), `"k1"`) {
		t.Fatalf("open without its key: %v", err)
	}
	var none *Box
	if got, err := none.Open("whsec_legacy", "x"); err != nil || got != "whsec_legacy" {
		t.Fatalf("plaintext opens as is: %q, %v", got, err)
	}
	if got, _ := none.Seal("whsec_x", "x"); got != "whsec_x" {
		t.Fatalf("without keys values stay as they are: %q", got)
	}
}

func TestInvalidKeysAreRefusedWithTheReason(t *testing.T) {
	for spec, want := range map[string]string{
		"k1":                          "id:base64key",
		"k 1:" + keyA[3:]:             "id",
		"k1:c2hvcnQ=":                 "32 bytes",
		"k1:not base64!":              "base64",
		keyA + "," + keyA:             "twice",
		"k1:" + keyA[3:] + ",bad id:": "id",
	} {
		if _, err := Parse(spec); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error about %q", spec, err, want)
		}
	}
}
