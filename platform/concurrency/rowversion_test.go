package concurrency

import (
	"encoding/json"
	"testing"
)

func TestARowVersionIsADecimalStringInJSONAndReadsBack(t *testing.T) {
	raw, err := json.Marshal(struct {
		Version RowVersion `json:"version"`
	}{Version: 4711})
	if err != nil || string(raw) != `{"version":"4711"}` {
		t.Fatalf("marshal: %s %v", raw, err)
	}
	var back struct {
		Version RowVersion `json:"version"`
	}
	if err := json.Unmarshal(raw, &back); err != nil || back.Version != 4711 {
		t.Fatalf("unmarshal: %+v %v", back, err)
	}
	if err := json.Unmarshal([]byte(`{"version":"-1"}`), &back); err == nil {
		t.Fatal("a negative version was read")
	}
}
