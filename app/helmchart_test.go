package main

import (
	"encoding/json"
	"maps"
	"os"
	"slices"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestTheHelmChartsSettingsAreKeelsonEnvs: the chart's values.yaml lists every setting of `keelson
// env` with its default (secrets under secrets.values, empty: a chart carries no credentials), and
// values.schema.json admits exactly those names, so a setting added here without the chart fails.
func TestTheHelmChartsSettingsAreKeelsonEnvs(t *testing.T) {
	const chart = "../deploy/helm/keelson/"
	raw, err := os.ReadFile(chart + "values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		Config  map[string]string `yaml:"config"`
		Secrets struct {
			Values map[string]string `yaml:"values"`
		} `yaml:"secrets"`
	}
	if err := yaml.Unmarshal(raw, &values); err != nil {
		t.Fatalf("values.yaml: %v", err)
	}
	wantConfig, wantSecrets := map[string]string{}, map[string]string{}
	for _, v := range Variables {
		if v.Secret {
			wantSecrets[v.Name] = ""
		} else {
			wantConfig[v.Name] = v.Default
		}
	}
	if !maps.Equal(values.Config, wantConfig) {
		for name, def := range wantConfig {
			if got, ok := values.Config[name]; !ok || got != def {
				t.Errorf("config.%s: %q (present %v), `keelson env` says %q", name, got, ok, def)
			}
		}
		for name := range values.Config {
			if _, ok := wantConfig[name]; !ok {
				t.Errorf("config.%s is not a setting of `keelson env` (or it is a secret)", name)
			}
		}
	}
	if !maps.Equal(values.Secrets.Values, wantSecrets) {
		t.Errorf("secrets.values: %v, want every secret setting, empty: %v", values.Secrets.Values, slices.Sorted(maps.Keys(wantSecrets)))
	}

	raw, err = os.ReadFile(chart + "values.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	type properties struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	var schema struct {
		Properties struct {
			Config  properties `json:"config"`
			Secrets struct {
				Properties struct {
					Values properties `json:"values"`
				} `json:"properties"`
			} `json:"secrets"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatalf("values.schema.json: %v", err)
	}
	if got, want := slices.Sorted(maps.Keys(schema.Properties.Config.Properties)), slices.Sorted(maps.Keys(wantConfig)); !slices.Equal(got, want) {
		t.Errorf("the schema's config admits\n %v\nwant\n %v", got, want)
	}
	if got, want := slices.Sorted(maps.Keys(schema.Properties.Secrets.Properties.Values.Properties)), slices.Sorted(maps.Keys(wantSecrets)); !slices.Equal(got, want) {
		t.Errorf("the schema's secrets.values admits %v, want %v", got, want)
	}
}
