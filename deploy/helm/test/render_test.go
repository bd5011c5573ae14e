// Package helmtest renders deploy/helm/keelson with helm's own packages and decodes every object
// strictly into the Kubernetes API types, so a misspelt or misplaced field fails here rather than
// at `helm install`. It is a module of its own: helm's dependencies stay out of Keelson's go.mod.
package helmtest

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

const chartDir = "../keelson"

// release is one rendering of the chart: its objects by kind and name.
type release struct {
	configMaps      map[string]*corev1.ConfigMap
	secrets         map[string]*corev1.Secret
	serviceAccounts map[string]*corev1.ServiceAccount
	services        map[string]*corev1.Service
	deployments     map[string]*appsv1.Deployment
	jobs            map[string]*batchv1.Job
	pdbs            map[string]*policyv1.PodDisruptionBudget
	hpas            map[string]*autoscalingv2.HorizontalPodAutoscaler
	policies        map[string]*networkingv1.NetworkPolicy
	monitors        map[string]*monitoringv1.ServiceMonitor
	kinds           []string // every object as kind/name, in file order
}

// render renders the chart with the values of files (values.yaml first, as helm does) and extra.
func render(t *testing.T, extra map[string]any, files ...string) (*release, error) {
	t.Helper()
	chrt, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load the chart: %v", err)
	}
	vals := map[string]any{}
	for _, f := range files {
		v, err := chartutil.ReadValuesFile(filepath.Join(chartDir, f))
		if err != nil {
			t.Fatalf("read %s: %v", f, err)
		}
		vals = chartutil.CoalesceTables(v.AsMap(), vals)
	}
	vals = chartutil.CoalesceTables(extra, vals)
	opts := chartutil.ReleaseOptions{Name: "keelson", Namespace: "keelson", Revision: 1, IsInstall: true}
	// ToRenderValues validates the values against values.schema.json.
	top, err := chartutil.ToRenderValues(chrt, vals, opts, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	// Strict: a template reading a value the values do not have fails instead of printing nothing.
	out, err := engine.Engine{Strict: true}.Render(chrt, top)
	if err != nil {
		return nil, err
	}
	return decode(t, chrt, out), nil
}

func mustRender(t *testing.T, extra map[string]any, files ...string) *release {
	t.Helper()
	r, err := render(t, extra, files...)
	if err != nil {
		t.Fatalf("render %v: %v", files, err)
	}
	return r
}

// decode splits the rendered files into objects and decodes each strictly into its API type.
func decode(t *testing.T, chrt *chart.Chart, out map[string]string) *release {
	t.Helper()
	r := &release{
		configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{},
		serviceAccounts: map[string]*corev1.ServiceAccount{}, services: map[string]*corev1.Service{},
		deployments: map[string]*appsv1.Deployment{}, jobs: map[string]*batchv1.Job{},
		pdbs: map[string]*policyv1.PodDisruptionBudget{}, hpas: map[string]*autoscalingv2.HorizontalPodAutoscaler{},
		policies: map[string]*networkingv1.NetworkPolicy{}, monitors: map[string]*monitoringv1.ServiceMonitor{},
	}
	names := slices.Sorted(maps.Keys(out))
	for _, file := range names {
		if !strings.HasSuffix(file, ".yaml") {
			continue // NOTES.txt, _helpers.tpl
		}
		for i, doc := range strings.Split(out[file], "\n---") {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			where := fmt.Sprintf("%s, document %d", strings.TrimPrefix(file, chrt.Name()+"/"), i+1)
			js, err := yaml.YAMLToJSONStrict([]byte(doc))
			if err != nil {
				t.Fatalf("%s: not YAML: %v\n%s", where, err, doc)
			}
			var head struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
				Metadata   struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if err := kjson.UnmarshalCaseSensitivePreserveInts(js, &head); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			var obj any
			name := head.Metadata.Name
			switch head.APIVersion + " " + head.Kind {
			case "v1 ConfigMap":
				obj = into(r.configMaps, name)
			case "v1 Secret":
				obj = into(r.secrets, name)
			case "v1 ServiceAccount":
				obj = into(r.serviceAccounts, name)
			case "v1 Service":
				obj = into(r.services, name)
			case "apps/v1 Deployment":
				obj = into(r.deployments, name)
			case "batch/v1 Job":
				obj = into(r.jobs, name)
			case "policy/v1 PodDisruptionBudget":
				obj = into(r.pdbs, name)
			case "autoscaling/v2 HorizontalPodAutoscaler":
				obj = into(r.hpas, name)
			case "networking.k8s.io/v1 NetworkPolicy":
				obj = into(r.policies, name)
			case "monitoring.coreos.com/v1 ServiceMonitor":
				obj = into(r.monitors, name)
			default:
				t.Fatalf("%s: %s %s is not a kind this test knows: add its API type", where, head.APIVersion, head.Kind)
			}
			strict, err := kjson.UnmarshalStrict(js, obj)
			if err != nil {
				t.Fatalf("%s: %s %s does not decode: %v\n%s", where, head.Kind, name, err, doc)
			}
			if len(strict) > 0 {
				t.Fatalf("%s: %s %s has fields its API type does not: %v\n%s", where, head.Kind, name, strict, doc)
			}
			if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
				t.Fatalf("%s: %s name %q: %v", where, head.Kind, name, errs)
			}
			r.kinds = append(r.kinds, head.Kind+"/"+name)
		}
	}
	return r
}

// into makes a new T under name in m and returns it to decode into; a name twice is a conflict.
func into[T any](m map[string]*T, name string) *T {
	if _, ok := m[name]; ok {
		panic("two objects of one kind named " + name)
	}
	v := new(T)
	m[name] = v
	return v
}

// requiredURLs are the two settings the chart refuses to render without.
var requiredURLs = map[string]any{"secrets": map[string]any{"values": map[string]any{
	"DATABASE_URL": "postgres://keelson:pw@db:5432/keelson",
	"AMQP_URL":     "amqp://keelson:pw@rabbitmq:5672/",
}}}

func sortedKinds(r *release) []string {
	k := slices.Clone(r.kinds)
	sort.Strings(k)
	return k
}

func TestTheDefaultValuesRenderObjectsTheKubernetesAPIAccepts(t *testing.T) {
	r := mustRender(t, requiredURLs, "values.yaml")
	want := []string{
		"ConfigMap/keelson", "ConfigMap/keelson-migrate", "Deployment/keelson", "Job/keelson-migrate",
		"PodDisruptionBudget/keelson", "Secret/keelson", "Secret/keelson-migrate", "Service/keelson",
		"ServiceAccount/keelson",
	}
	if got := sortedKinds(r); !slices.Equal(got, want) {
		t.Fatalf("objects:\n got %v\nwant %v", got, want)
	}
	checkRelease(t, r, "")
}

func TestTheProductionValuesRenderObjectsTheKubernetesAPIAccepts(t *testing.T) {
	r := mustRender(t, nil, "values.yaml", "values-production.yaml")
	want := []string{
		"ConfigMap/keelson", "ConfigMap/keelson-migrate", "Deployment/keelson", "HorizontalPodAutoscaler/keelson",
		"Job/keelson-migrate", "NetworkPolicy/keelson", "PodDisruptionBudget/keelson", "Service/keelson",
		"ServiceAccount/keelson", "ServiceMonitor/keelson",
	}
	if got := sortedKinds(r); !slices.Equal(got, want) {
		t.Fatalf("objects (the Secret is made beforehand, so none is rendered):\n got %v\nwant %v", got, want)
	}
	checkRelease(t, r, "keelson")

	d := r.deployments["keelson"]
	if d.Spec.Replicas != nil {
		t.Fatalf("with the autoscaler on, the Deployment must not set replicas (each upgrade would reset them): %d", *d.Spec.Replicas)
	}
	hpa := r.hpas["keelson"]
	if hpa.Spec.ScaleTargetRef.Kind != "Deployment" || hpa.Spec.ScaleTargetRef.Name != d.Name {
		t.Fatalf("the autoscaler scales %+v, not the Deployment", hpa.Spec.ScaleTargetRef)
	}
	if len(hpa.Spec.Metrics) != 1 || hpa.Spec.Metrics[0].Resource == nil || hpa.Spec.Metrics[0].Resource.Name != corev1.ResourceCPU {
		t.Fatalf("the autoscaler must scale on CPU: %+v", hpa.Spec.Metrics)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if c.Resources.Requests.Cpu().IsZero() {
		t.Fatal("a CPU utilization target needs a CPU request")
	}
	env := envOf(c)
	if ref := env["DATABASE_URL"].ValueFrom; ref == nil || ref.SecretKeyRef == nil || ref.SecretKeyRef.Name != "keelson-db-app" || ref.SecretKeyRef.Key != "uri" {
		t.Fatalf("DATABASE_URL must come from CloudNativePG's app Secret: %+v", env["DATABASE_URL"])
	}
	if v := env["AMQP_URL"].Value; v != "amqp://$(RABBITMQ_USERNAME):$(RABBITMQ_PASSWORD)@keelson-rabbitmq:5672/" {
		t.Fatalf("AMQP_URL = %q", v)
	}
	// $(NAME) expands only names set earlier in the list.
	order := envOrder(c)
	if order["RABBITMQ_USERNAME"] > order["AMQP_URL"] || order["RABBITMQ_PASSWORD"] > order["AMQP_URL"] {
		t.Fatalf("AMQP_URL must come after the variables it uses: %v", order)
	}

	sm := r.monitors["keelson"]
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "metrics" || sm.Spec.Endpoints[0].Path != "/metrics" {
		t.Fatalf("the ServiceMonitor must scrape the metrics port: %+v", sm.Spec.Endpoints)
	}
	if !servicePort(r.services["keelson"], "metrics") {
		t.Fatal("the ServiceMonitor scrapes a port the Service lacks")
	}
	if got := labels.SelectorFromSet(sm.Spec.Selector.MatchLabels); !got.Matches(labels.Set(r.services["keelson"].Labels)) {
		t.Fatal("the ServiceMonitor does not select the Service")
	}

	np := r.policies["keelson"]
	if !selects(np.Spec.PodSelector.MatchLabels, d.Spec.Template.Labels) {
		t.Fatal("the NetworkPolicy does not select the replicas")
	}
	ports := map[string]bool{}
	for _, rule := range np.Spec.Ingress {
		if len(rule.From) == 0 {
			t.Fatalf("production admits every source to %v", rule.Ports)
		}
		for _, p := range rule.Ports {
			if p.Port.Type != intstr.String || !containerPort(c, p.Port.StrVal) {
				t.Fatalf("the NetworkPolicy admits port %v, which the container does not name", p.Port)
			}
			ports[p.Port.StrVal] = true
		}
	}
	if !ports["http"] || !ports["metrics"] {
		t.Fatalf("the NetworkPolicy must admit the API and the metrics ports: %v", ports)
	}
}

// checkRelease holds for every rendering: what the replicas and the migration read exists, the
// probes use the health routes, the selectors agree and the hooks run in order.
func checkRelease(t *testing.T, r *release, existingSecret string) {
	t.Helper()
	d := r.deployments["keelson"]
	if d == nil {
		t.Fatal("no Deployment keelson")
	}
	pod := d.Spec.Template
	if !selects(d.Spec.Selector.MatchLabels, pod.Labels) {
		t.Fatal("the Deployment's selector does not select its pods")
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("containers: %d", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	if !slices.Equal(c.Args, []string{"serve"}) {
		t.Fatalf("the replica runs %v", c.Args)
	}
	probe := func(name string, p *corev1.Probe, path string) {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path || p.HTTPGet.Port.StrVal != "http" {
			t.Fatalf("%s probe: %+v, want GET %s on the http port", name, p, path)
		}
	}
	probe("readiness", c.ReadinessProbe, "/readyz")
	probe("liveness", c.LivenessProbe, "/healthz")
	probe("startup", c.StartupProbe, "/healthz")
	if !containerPort(c, "http") {
		t.Fatal("the container names no http port")
	}
	if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Fatalf("resources: %+v", c.Resources)
	}
	env := envOf(c)
	if ref := env["INSTANCE_ID"].ValueFrom; ref == nil || ref.FieldRef == nil || ref.FieldRef.FieldPath != "metadata.name" {
		t.Fatalf("INSTANCE_ID must be the pod's name: %+v", env["INSTANCE_ID"])
	}
	if env["GOMEMLIMIT"].Value == "" {
		t.Fatal("no GOMEMLIMIT")
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g == nil || *g <= 25 {
		t.Fatal("the grace period must exceed SHUTDOWN_TIMEOUT (25 s)")
	}
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Fatal("the root filesystem must be read-only")
	}
	if ps := pod.Spec.SecurityContext; ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot {
		t.Fatal("pods must run as non-root")
	}

	// The replicas read the release's ConfigMap and Secret (or the existing one), which hold every setting.
	checkSources(t, r, "replicas", c.EnvFrom, "keelson", existingSecret)

	svc := r.services["keelson"]
	if !selects(svc.Spec.Selector, pod.Labels) {
		t.Fatal("the Service does not select the replicas")
	}
	for _, p := range svc.Spec.Ports {
		if !containerPort(c, p.TargetPort.StrVal) {
			t.Fatalf("the Service targets port %v, which the container does not name", p.TargetPort)
		}
	}
	if pdb := r.pdbs["keelson"]; pdb == nil || !selects(pdb.Spec.Selector.MatchLabels, pod.Labels) {
		t.Fatal("the PodDisruptionBudget does not select the replicas")
	}
	if sa := pod.Spec.ServiceAccountName; r.serviceAccounts[sa] == nil {
		t.Fatalf("the pods run as service account %q, which the release does not make", sa)
	}

	// The migration: a Job run before install and upgrade, after copies of the settings made just for it.
	job := r.jobs["keelson-migrate"]
	if job == nil {
		t.Fatal("no migration Job")
	}
	if hook := job.Annotations["helm.sh/hook"]; hook != "pre-install,pre-upgrade" {
		t.Fatalf("the migration Job's hook is %q", hook)
	}
	jc := job.Spec.Template.Spec.Containers[0]
	if !slices.Equal(jc.Args, []string{"migrate"}) || jc.Image != c.Image {
		t.Fatalf("the migration runs %s %v, the replicas %s", jc.Image, jc.Args, c.Image)
	}
	if job.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Fatalf("restart policy %q", job.Spec.Template.Spec.RestartPolicy)
	}
	if selects(d.Spec.Selector.MatchLabels, job.Spec.Template.Labels) || selects(svc.Spec.Selector, job.Spec.Template.Labels) {
		t.Fatal("the migration's pod would count as a replica: the Deployment's or Service's selector matches it")
	}
	checkSources(t, r, "migration", jc.EnvFrom, "keelson-migrate", existingSecret)
	for _, ref := range jc.EnvFrom {
		var hook map[string]string
		switch {
		case ref.ConfigMapRef != nil:
			hook = r.configMaps[ref.ConfigMapRef.Name].Annotations
		case ref.SecretRef != nil && existingSecret == "":
			hook = r.secrets[ref.SecretRef.Name].Annotations
		default:
			continue
		}
		if hook["helm.sh/hook"] != job.Annotations["helm.sh/hook"] || weight(t, hook) >= weight(t, job.Annotations) {
			t.Fatalf("what the migration reads must be a hook made before it: %v", hook)
		}
	}
	if !mapsEqualEnv(envOf(jc), env) {
		t.Fatal("the migration's environment differs from the replicas'")
	}
}

// checkSources: envFrom names the ConfigMap and Secret called name (or existingSecret), and between
// them they hold every setting of values.yaml's config and secrets.values.
func checkSources(t *testing.T, r *release, who string, from []corev1.EnvFromSource, name, existingSecret string) {
	t.Helper()
	keys := map[string]bool{}
	var sawConfig, sawSecret bool
	for _, ref := range from {
		switch {
		case ref.ConfigMapRef != nil:
			cm := r.configMaps[ref.ConfigMapRef.Name]
			if cm == nil || ref.ConfigMapRef.Name != name {
				t.Fatalf("the %s read ConfigMap %q, not the release's %q", who, ref.ConfigMapRef.Name, name)
			}
			sawConfig = true
			for k := range cm.Data {
				keys[k] = true
			}
		case ref.SecretRef != nil:
			sawSecret = true
			if existingSecret != "" {
				if ref.SecretRef.Name != existingSecret {
					t.Fatalf("the %s read Secret %q, not the existing %q", who, ref.SecretRef.Name, existingSecret)
				}
				continue
			}
			s := r.secrets[ref.SecretRef.Name]
			if s == nil || ref.SecretRef.Name != name {
				t.Fatalf("the %s read Secret %q, not the release's %q", who, ref.SecretRef.Name, name)
			}
			for k := range s.Data {
				keys[k] = true
			}
		}
	}
	if !sawConfig || !sawSecret {
		t.Fatalf("the %s read no ConfigMap or no Secret: %+v", who, from)
	}
	want := settings(t, existingSecret != "")
	if got := slices.Sorted(maps.Keys(keys)); !slices.Equal(got, want) {
		t.Fatalf("the %s read settings\n %v\nwant (values.yaml's config and secrets.values)\n %v", who, got, want)
	}
}

// settings are the names under values.yaml's config, and secrets.values unless they come from an existing Secret.
func settings(t *testing.T, existingSecret bool) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Config  map[string]any `json:"config"`
		Secrets struct {
			Values map[string]any `json:"values"`
		} `json:"secrets"`
	}
	if err := yaml.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	names := slices.Collect(maps.Keys(v.Config))
	if !existingSecret {
		names = slices.AppendSeq(names, maps.Keys(v.Secrets.Values))
	}
	sort.Strings(names)
	return names
}

func TestValuesTheSchemaRefusesDoNotRender(t *testing.T) {
	cases := map[string]map[string]any{
		"a setting keelson does not read": {"config": map[string]any{"DATABASE_POOL": "10"}},
		"a secret keelson does not read":  {"secrets": map[string]any{"values": map[string]any{"PASSWORD": "x"}}},
		"a misspelt key":                  {"replicas": 3},
		"replicas as words":               {"replicaCount": "three"},
		"a secret key ref without a key":  {"secretKeyRefs": map[string]any{"DATABASE_URL": map[string]any{"name": "db"}}},
		"a secret key ref of no setting":  {"secretKeyRefs": map[string]any{"PGPASSWORD": map[string]any{"name": "db", "key": "password"}}},
		"an unknown pull policy":          {"image": map[string]any{"pullPolicy": "Sometimes"}},
	}
	for name, bad := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := render(t, chartutil.CoalesceTables(bad, requiredURLs), "values.yaml")
			if err == nil || !strings.Contains(err.Error(), "schema") {
				t.Fatalf("rendered, or failed for another reason: %v", err)
			}
		})
	}
}

func TestTheChartRefusesToRenderWithoutTheDatabaseAndBrokerURLs(t *testing.T) {
	_, err := render(t, nil, "values.yaml")
	if err == nil || !strings.Contains(err.Error(), "DATABASE_URL is required") {
		t.Fatalf("want DATABASE_URL is required, got %v", err)
	}
	_, err = render(t, map[string]any{"secrets": map[string]any{"values": map[string]any{"DATABASE_URL": "postgres://db/keelson"}}}, "values.yaml")
	if err == nil || !strings.Contains(err.Error(), "AMQP_URL is required") {
		t.Fatalf("want AMQP_URL is required, got %v", err)
	}
}

func TestMetricsOnTheirOwnAddressGetAPortOfTheirOwn(t *testing.T) {
	r := mustRender(t, chartutil.CoalesceTables(map[string]any{
		"config":         map[string]any{"METRICS_ADDR": "0.0.0.0:9464", "HTTP_ADDR": ":8000"},
		"serviceMonitor": map[string]any{"enabled": true},
	}, requiredURLs), "values.yaml")
	c := r.deployments["keelson"].Spec.Template.Spec.Containers[0]
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["http"] != 8000 || ports["metrics"] != 9464 {
		t.Fatalf("container ports follow HTTP_ADDR and METRICS_ADDR: %v", ports)
	}
	if ep := r.monitors["keelson"].Spec.Endpoints; ep[0].Port != "metrics" {
		t.Fatalf("scraped port %q", ep[0].Port)
	}
	// Without METRICS_ADDR, /metrics is on the API's port.
	r = mustRender(t, chartutil.CoalesceTables(map[string]any{"serviceMonitor": map[string]any{"enabled": true}}, requiredURLs), "values.yaml")
	if ep := r.monitors["keelson"].Spec.Endpoints; ep[0].Port != "http" {
		t.Fatalf("scraped port %q", ep[0].Port)
	}
}

// weight is a hook's helm.sh/hook-weight: helm runs lower weights first.
func weight(t *testing.T, annotations map[string]string) int {
	t.Helper()
	w, err := strconv.Atoi(annotations["helm.sh/hook-weight"])
	if err != nil {
		t.Fatalf("hook weight: %v", err)
	}
	return w
}

func selects(selector, podLabels map[string]string) bool {
	return len(selector) > 0 && labels.SelectorFromSet(selector).Matches(labels.Set(podLabels))
}

func containerPort(c corev1.Container, name string) bool {
	return slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == name })
}

func servicePort(s *corev1.Service, name string) bool {
	return slices.ContainsFunc(s.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == name })
}

func envOf(c corev1.Container) map[string]corev1.EnvVar {
	m := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		m[e.Name] = e
	}
	return m
}

func envOrder(c corev1.Container) map[string]int {
	m := map[string]int{}
	for i, e := range c.Env {
		m[e.Name] = i
	}
	return m
}

func mapsEqualEnv(a, b map[string]corev1.EnvVar) bool {
	return maps.EqualFunc(a, b, func(x, y corev1.EnvVar) bool {
		xj, _ := yaml.Marshal(x)
		yj, _ := yaml.Marshal(y)
		return string(xj) == string(yj)
	})
}
