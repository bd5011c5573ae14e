package tests

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// repoRoot is the module root, one level above this package.
const repoRoot = ".."

// goBuild is one `go build` command: the environment it sets, its flags, its output and its package.
type goBuild struct {
	Env     map[string]string
	Flags   []string // everything but -o and the package
	Output  string
	Package string
}

// builtBinaries caches binaries built once per test process, keyed by package, from a copy of
// the Docker build context.
type builtBinaries struct {
	mu      sync.Mutex
	dir     string
	context string
	path    map[string]string
	errs    map[string]error
}

var binaries = &builtBinaries{path: map[string]string{}, errs: map[string]error{}}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "keelson-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "tests:", err)
		os.Exit(1)
	}
	binaries.dir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	cleanBroker()
	os.Exit(code)
}

// binary returns the path of pkg ("./app" or "./examples/receiver") built with the Dockerfile's exact
// command from the files of the Docker build context, building it on first use.
func binary(t testing.TB, pkg string) string {
	t.Helper()
	binaries.mu.Lock()
	defer binaries.mu.Unlock()
	if p, ok := binaries.path[pkg]; ok {
		return p
	}
	if err, ok := binaries.errs[pkg]; ok {
		t.Fatalf("build %s: %v", pkg, err)
	}
	b, err := dockerfileBuild(pkg)
	if err == nil && binaries.context == "" {
		binaries.context = filepath.Join(binaries.dir, "context")
		err = dockerContext(binaries.context)
	}
	if err == nil {
		out := filepath.Join(binaries.dir, filepath.Base(b.Output))
		err = b.run(binaries.context, out)
		binaries.path[pkg] = out
	}
	if err != nil {
		binaries.errs[pkg] = err
		t.Fatalf("build %s: %v", pkg, err)
	}
	return binaries.path[pkg]
}

// keelson is the binary under test.
func keelson(t testing.TB) string { return binary(t, "./app") }

// run executes the build into out with the same environment and flags, in dir (the module root of a build context).
// stamp is the build information tests stamp into the binaries, as the Dockerfile's build arguments
// (VERSION, COMMIT, BUILD_DATE) would.
var stamp = map[string]string{
	"VERSION":    "v0.0.0-test",
	"COMMIT":     "0123456789abcdef0123456789abcdef01234567",
	"BUILD_DATE": "2026-01-02T03:04:05Z",
}

func (b goBuild) run(dir, out string) error {
	args := []string{"build"}
	for _, f := range b.Flags { // the shell of a RUN instruction expands ${ARG}s
		args = append(args, os.Expand(f, func(name string) string { return stamp[name] }))
	}
	args = append(args, "-o", out, b.Package)
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = os.Environ()
	for k, v := range b.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, output)
	}
	return nil
}

// dockerfileBuild finds the RUN instruction of the Dockerfile that builds pkg.
func dockerfileBuild(pkg string) (goBuild, error) {
	builds, err := dockerfileBuilds()
	if err != nil {
		return goBuild{}, err
	}
	for _, b := range builds {
		if b.Package == pkg {
			return b, nil
		}
	}
	return goBuild{}, fmt.Errorf("the Dockerfile has no `go build` of %s", pkg)
}

// dockerfileBuilds parses every `go build` of the Dockerfile's RUN instructions.
func dockerfileBuilds() ([]goBuild, error) {
	instructions, err := dockerfileInstructions()
	if err != nil {
		return nil, err
	}
	var out []goBuild
	for _, in := range instructions {
		if in.Keyword != "RUN" || !strings.Contains(in.Args, "go build") {
			continue
		}
		words, err := shellWords(in.Args)
		if err != nil {
			return nil, fmt.Errorf("Dockerfile RUN %q: %w", in.Args, err)
		}
		for len(words) > 0 && strings.HasPrefix(words[0], "--") { // RUN --mount=… options
			words = words[1:]
		}
		b, err := parseGoBuild(words)
		if err != nil {
			return nil, fmt.Errorf("Dockerfile RUN %q: %w", in.Args, err)
		}
		out = append(out, b)
	}
	return out, nil
}

// makeBuild parses the recipe of the Makefile's `build` target, expanding $(VARS).
func makeBuild() (goBuild, error) {
	f, err := os.Open(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		return goBuild{}, err
	}
	defer f.Close()
	vars := map[string]string{}
	assign := regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)\s*:?=\s*(.*)$`)
	var recipe []string
	inBuild := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "\t"):
			if inBuild {
				recipe = append(recipe, strings.TrimSpace(line))
			}
		case strings.HasPrefix(line, "build:"):
			inBuild = true
		default:
			inBuild = false
			if m := assign.FindStringSubmatch(line); m != nil {
				vars[m[1]] = m[2]
			}
		}
	}
	if err := sc.Err(); err != nil {
		return goBuild{}, err
	}
	expand := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	for _, line := range recipe {
		if !strings.Contains(line, "go build") {
			continue
		}
		for expand.MatchString(line) { // variables may refer to variables
			line = expand.ReplaceAllStringFunc(line, func(ref string) string { return vars[expand.FindStringSubmatch(ref)[1]] })
		}
		line = strings.ReplaceAll(line, "$$", "$") // make's escape: the recipe's shell sees one $
		words, err := shellWords(line)
		if err != nil {
			return goBuild{}, fmt.Errorf("Makefile build: %w", err)
		}
		return parseGoBuild(words)
	}
	return goBuild{}, fmt.Errorf("the Makefile's build target runs no `go build`")
}

// parseGoBuild reads `[VAR=value…] go build [flags] -o out pkg`.
func parseGoBuild(words []string) (goBuild, error) {
	b := goBuild{Env: map[string]string{}}
	for len(words) > 0 && strings.Contains(words[0], "=") && !strings.HasPrefix(words[0], "-") {
		k, v, _ := strings.Cut(words[0], "=")
		b.Env[k] = v
		words = words[1:]
	}
	if len(words) < 3 || words[0] != "go" || words[1] != "build" {
		return goBuild{}, fmt.Errorf("not a go build command: %q", strings.Join(words, " "))
	}
	words = words[2:]
	for i := 0; i < len(words); i++ {
		switch w := words[i]; {
		case w == "-o" && i+1 < len(words):
			b.Output = words[i+1]
			i++
		case strings.HasPrefix(w, "-"):
			b.Flags = append(b.Flags, w)
			if (w == "-ldflags" || w == "-tags" || w == "-gcflags") && i+1 < len(words) {
				b.Flags = append(b.Flags, words[i+1])
				i++
			}
		default:
			b.Package = w
		}
	}
	if b.Package == "" || b.Output == "" {
		return goBuild{}, fmt.Errorf("go build without -o or package: %q", strings.Join(words, " "))
	}
	return b, nil
}

// shellWords splits a command line the way sh does for the simple quoting Dockerfiles and Makefiles use.
func shellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated quote in %q", s)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// dockerInstruction is one Dockerfile instruction with its continuation lines joined.
type dockerInstruction struct {
	Keyword string
	Args    string
}

func dockerfileInstructions() ([]dockerInstruction, error) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		return nil, err
	}
	var out []dockerInstruction
	var cur strings.Builder
	flush := func() {
		line := strings.TrimSpace(cur.String())
		cur.Reset()
		if line == "" {
			return
		}
		keyword, args, _ := strings.Cut(line, " ")
		out = append(out, dockerInstruction{Keyword: strings.ToUpper(keyword), Args: strings.TrimSpace(args)})
	}
	for _, line := range strings.Split(string(raw), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") {
			continue
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur.WriteString(strings.TrimSuffix(trimmed, "\\") + " ")
			continue
		}
		cur.WriteString(trimmed)
		flush()
	}
	flush()
	return out, nil
}
