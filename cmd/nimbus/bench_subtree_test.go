package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The command on the embedded target (a real server in this process): the
// summary line, the JSON file with the documented field names, exit 0.
func TestBenchSubtreeEmbedded(t *testing.T) {
	out := filepath.Join(t.TempDir(), "subtree.json")
	code, stdout, stderr := runBench("subtree", "--files", "200", "--op", "delete", "--window", "200ms", "--json", out)
	if code != 0 {
		t.Fatalf("exit %d: %s %s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "subtree delete of /bench/.subtree-delete-200-") {
		t.Fatalf("stdout %q", stdout)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Command []string         `json:"command"`
		Results []map[string]any `json:"results"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || len(doc.Results) != 1 || doc.Command[0] != "subtree" {
		t.Fatalf("%s: %v", b, err)
	}
	r := doc.Results[0]
	for _, k := range []string{"files", "seconds", "server_rss_mb_before", "server_rss_mb_max",
		"background_ops_s_before", "background_ops_s_during", "background_p99_ms_before", "background_p99_ms_during"} {
		if _, ok := r[k].(float64); !ok {
			t.Errorf("%s: %v", k, r[k])
		}
	}
	if r["op"] != "delete" || r["target"] != "embedded" || r["server_rss_mb_before"].(float64) <= 0 {
		t.Fatalf("result %v", r)
	}
}

func TestBenchSubtreeUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"subtree", "--op", "chown", "--target", "nimbus://h:1"},
		{"subtree", "--files", "0", "--target", "nimbus://h:1"},
		{"subtree", "--window", "0s", "--target", "nimbus://h:1"},
	} {
		if code, _, stderr := runBench(args...); code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, code, stderr)
		}
	}
}
