package tests

import (
	"bytes"
	"debug/elf"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestDockerfileBuildsAStaticStrippedBinary(t *testing.T) {
	for _, pkg := range []string{"./app", "./examples/receiver"} {
		t.Run(pkg, func(t *testing.T) {
			path := binary(t, pkg)
			f, err := elf.Open(path)
			if err != nil {
				t.Fatalf("open %s: %v", path, err)
			}
			defer f.Close()
			for _, p := range f.Progs {
				if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
					t.Fatalf("%s has a %s program header: not a static binary", pkg, p.Type)
				}
			}
			if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
				t.Fatalf("%s links %v", pkg, libs)
			}
			if f.Section(".symtab") != nil || f.Section(".debug_info") != nil {
				t.Fatalf("%s keeps its symbol table or DWARF: -ldflags \"-s -w\" not applied", pkg)
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, dir := range []string{binaries.context, repoRoot} {
				abs, _ := filepath.Abs(dir)
				if bytes.Contains(raw, []byte(abs+"/")) {
					t.Fatalf("%s contains the build directory %s: -trimpath not applied", pkg, abs)
				}
			}
		})
	}
}

func TestDockerfileBuildsWithTheFlagsOfMakeBuild(t *testing.T) {
	docker, err := dockerfileBuild("./app")
	if err != nil {
		t.Fatal(err)
	}
	if docker.Env["CGO_ENABLED"] != "0" {
		t.Fatalf("the Dockerfile builds with CGO_ENABLED=%q, want 0", docker.Env["CGO_ENABLED"])
	}
	for _, flag := range []string{"-trimpath", "-ldflags"} {
		if !slices.Contains(docker.Flags, flag) {
			t.Fatalf("the Dockerfile's go build lacks %s: %v", flag, docker.Flags)
		}
	}
	mk, err := makeBuild()
	if err != nil {
		t.Fatalf("make build: %v", err)
	}
	if !reflect.DeepEqual(docker.Env, mk.Env) || !reflect.DeepEqual(docker.Flags, mk.Flags) || docker.Package != mk.Package {
		t.Fatalf("Dockerfile and `make build` differ:\n Dockerfile: %v go build %v %s\n Makefile:   %v go build %v %s",
			docker.Env, docker.Flags, docker.Package, mk.Env, mk.Flags, mk.Package)
	}
	builds, err := dockerfileBuilds()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range builds {
		if !reflect.DeepEqual(b.Env, docker.Env) || !reflect.DeepEqual(b.Flags, docker.Flags) {
			t.Fatalf("%s is built with %v %v, the app with %v %v", b.Package, b.Env, b.Flags, docker.Env, docker.Flags)
		}
	}
}

func TestDockerfileFinalImagesRunAsNonRoot(t *testing.T) {
	instructions, err := dockerfileInstructions()
	if err != nil {
		t.Fatal(err)
	}
	type stage struct {
		base, user, entrypoint, cmd string
		copies                      []string
	}
	stages := map[string]*stage{}
	var order []string
	var cur *stage
	globalArgs := map[string]string{} // ARGs before the first FROM: the base images' defaults
	for _, in := range instructions {
		switch in.Keyword {
		case "ARG":
			if cur == nil {
				name, def, _ := strings.Cut(in.Args, "=")
				globalArgs[name] = def
			}
		case "FROM":
			words := strings.Fields(in.Args)
			name := words[len(words)-1]
			base := os.Expand(words[0], func(v string) string { return globalArgs[v] })
			cur = &stage{base: base}
			stages[name] = cur
			order = append(order, name)
		case "USER":
			cur.user = in.Args
		case "ENTRYPOINT":
			cur.entrypoint = in.Args
		case "CMD":
			cur.cmd = in.Args
		case "COPY":
			cur.copies = append(cur.copies, in.Args)
		}
	}
	if len(order) == 0 || order[len(order)-1] != "app" {
		t.Fatalf("the last stage must be the app image (a plain docker build), stages: %v", order)
	}
	if b := stages["build"]; b == nil || !strings.HasPrefix(b.base, "golang:1.26") {
		t.Fatalf("the build stage must use golang:1.26, stages: %v", order)
	}
	for _, name := range []string{"app", "receiver"} {
		s := stages[name]
		if s == nil {
			t.Fatalf("no %q stage (docker-compose.yml builds it as a target)", name)
		}
		if !strings.HasPrefix(s.base, "gcr.io/distroless/static") || !strings.HasSuffix(s.base, ":nonroot") {
			t.Fatalf("stage %s is based on %s, want a distroless static nonroot image", name, s.base)
		}
		if s.user == "" || strings.HasPrefix(s.user, "root") || strings.HasPrefix(s.user, "0") {
			t.Fatalf("stage %s runs as %q, want a non-root user", name, s.user)
		}
		if len(s.copies) != 1 || !strings.HasPrefix(s.copies[0], "--from=build ") {
			t.Fatalf("stage %s must copy only the binary from the build stage, copies %v", name, s.copies)
		}
	}
	if app := stages["app"]; app.entrypoint != `["/usr/local/bin/keelson"]` || app.cmd != `["serve"]` {
		t.Fatalf("app image: ENTRYPOINT %s CMD %s, want keelson serve", app.entrypoint, app.cmd)
	}
	// Each final stage runs the binary it copies, and copies one the build stage produces.
	builds, err := dockerfileBuilds()
	if err != nil {
		t.Fatal(err)
	}
	outputs := map[string]bool{}
	for _, b := range builds {
		outputs[b.Output] = true
	}
	for _, name := range []string{"app", "receiver"} {
		s := stages[name]
		words := strings.Fields(s.copies[0])
		from, to := words[1], words[2]
		if !outputs[from] {
			t.Errorf("stage %s copies %s, which no go build of the Dockerfile writes (%v)", name, from, outputs)
		}
		if s.entrypoint != `["`+to+`"]` {
			t.Errorf("stage %s copies the binary to %s but its ENTRYPOINT is %s", name, to, s.entrypoint)
		}
	}
}

// TestDockerfileBuildsWithoutBuildKitOrARegistryOfItsOwn keeps the file buildable by the legacy
// builder (Compose v1 and machines without buildx): a `# syntax=` line makes BuildKit pull a frontend
// image, and RUN --mount does not exist without BuildKit. Base images come from build arguments.
func TestDockerfileBuildsWithoutBuildKitOrARegistryOfItsOwn(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(strings.ReplaceAll(strings.ToLower(line), " ", ""), "#syntax=") {
			t.Errorf("Dockerfile has a parser directive %q: BuildKit would pull its frontend", line)
		}
	}
	instructions, err := dockerfileInstructions()
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range instructions {
		if in.Keyword == "RUN" && strings.HasPrefix(in.Args, "--") {
			t.Errorf("RUN %s: flags need BuildKit", in.Args)
		}
		if in.Keyword == "FROM" && !strings.HasPrefix(in.Args, "${") && !strings.HasPrefix(in.Args, "build ") {
			t.Errorf("FROM %s: base images must be build arguments (GO_IMAGE, RUNTIME_IMAGE)", in.Args)
		}
	}
}

func TestDockerignoreKeepsSourcesAndDropsTheRest(t *testing.T) {
	patterns, err := dockerignore()
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]bool{
		"app/main.go":                            false,
		"migrations/platform/00001_platform.sql": false,
		"go.sum":                                 false,
		".git/HEAD":                              true,
		"bin/keelson":                            true,
		"docs/architecture.md":                   true,
		"platform/jobs/runner_test.go":           true,
		"app/app_test.go":                        true,
		"bench/jobs/jobs":                        true,
		"bench/outbox/main.go":                   true,
		"tests/compose/compose_test.go":          true,
		"platform/jobs/jobs.test":                true,
		"keelson.test":                           true,
		"vendor/modules.txt":                     false,
		"examples/receiver/main.go":              false,
		"platform/httpapi/openapi_base.json":     false,
	} {
		if got := ignored(path, patterns); got != want {
			t.Errorf("%s ignored = %v, want %v", path, got, want)
		}
	}
}
