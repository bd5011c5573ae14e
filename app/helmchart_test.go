package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestTheHelmChartsSettingsAreKeelsonEnvs: the chart's values.yaml lists every setting of `keelson
// env` with its default (secrets under secrets.values, empty: a chart carries no credentials), and
// values.schema.json admits exactly those names, so a setting added here without the chart fails.
func TestTheHelmChartsSettingsAreKeelsonEnvs(t *testing.T) {
	const chart = "../deploy/helm/keelson/"
	if os.Getenv("CHART_UPDATE") != "" {
		writeChartSettings(t, chart)
	}
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
	// A setting added to Variables goes into values.yaml (config, or secrets.values when Secret) and
	// into values.schema.json's config or secrets.values properties and secretKeyRefs' names:
	// CHART_UPDATE=1 go test -run TestTheHelmChartsSettingsAreKeelsonEnvs ./app/ writes them.
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
			SecretKeyRefs struct {
				PropertyNames struct {
					Enum []string `json:"enum"`
				} `json:"propertyNames"`
			} `json:"secretKeyRefs"`
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
	every := slices.Sorted(maps.Keys(wantConfig))
	every = append(every, slices.Sorted(maps.Keys(wantSecrets))...)
	if got := slices.Sorted(slices.Values(schema.Properties.SecretKeyRefs.PropertyNames.Enum)); !slices.Equal(got, slices.Sorted(slices.Values(every))) {
		t.Errorf("the schema's secretKeyRefs admits %v, want every setting", got)
	}
}

// writeChartSettings rewrites the settings of values.yaml (between `config:` and the secrets'
// comment, and under `secrets.values`) and of values.schema.json from Variables.
func writeChartSettings(t *testing.T, chart string) {
	t.Helper()
	raw, err := os.ReadFile(chart + "values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var config, secrets strings.Builder
	var configNames, secretNames []string
	for _, v := range Variables {
		value, indent, to := v.Default, "  ", &config
		if v.Secret {
			value, indent, to = "", "    ", &secrets
			secretNames = append(secretNames, v.Name)
		} else {
			configNames = append(configNames, v.Name)
		}
		fmt.Fprintf(to, "%s# %s\n%s%s: %q\n", indent, v.plainDoc(), indent, v.Name, value)
	}
	text := string(raw)
	text = replaceBetween(t, text, "\nconfig:\n", "\n# The settings of `keelson env` that are secrets", config.String())
	text = replaceBetween(t, text, "\n  values:\n", "\n# Settings taken from keys of Secrets", secrets.String())
	if err := os.WriteFile(chart+"values.yaml", []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}

	raw, err = os.ReadFile(chart + "values.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatal(err)
	}
	props := schema["properties"].(map[string]any)
	setting := map[string]any{"type": []string{"string", "number", "boolean"}}
	configProps, secretProps := map[string]any{}, map[string]any{}
	for _, name := range configNames {
		configProps[name] = setting
	}
	for _, name := range secretNames {
		secretProps[name] = map[string]any{"type": "string"}
	}
	props["config"].(map[string]any)["properties"] = configProps
	props["secrets"].(map[string]any)["properties"].(map[string]any)["values"].(map[string]any)["properties"] = secretProps
	props["secretKeyRefs"].(map[string]any)["propertyNames"] = map[string]any{"enum": append(configNames, secretNames...)}
	out, err := json.MarshalIndent(schema, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(chart+"values.schema.json", append(out, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// replaceBetween replaces what lies between the end of start and the beginning of end.
func replaceBetween(t *testing.T, text, start, end, with string) string {
	t.Helper()
	i := strings.Index(text, start)
	j := strings.Index(text, end)
	if i < 0 || j < i {
		t.Fatalf("values.yaml has no %q … %q section", start, end)
	}
	return text[:i+len(start)] + with + text[j:]
}
