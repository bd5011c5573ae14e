package tests

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
)

// dockerContext copies the files `docker build .` would send — the repository's files minus the
// .dockerignore patterns — into dir, so the binaries under test are built from what the image
// is built from (a file the build needs but .dockerignore drops fails here, not in a release).
func dockerContext(dir string) error {
	patterns, err := dockerignore()
	if err != nil {
		return err
	}
	files, err := repositoryFiles()
	if err != nil {
		return err
	}
	for _, rel := range files {
		if ignored(rel, patterns) {
			continue
		}
		if err := copyFile(filepath.Join(repoRoot, rel), filepath.Join(dir, rel)); err != nil {
			return err
		}
	}
	return nil
}

func dockerignore() ([]string, error) {
	f, err := os.Open(filepath.Join(repoRoot, ".dockerignore"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var patterns []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "!") {
			return nil, fmt.Errorf(".dockerignore: exceptions (%s) are not supported by this test", line)
		}
		patterns = append(patterns, strings.TrimPrefix(path.Clean(line), "/"))
	}
	return patterns, sc.Err()
}

// ignored applies Docker's rules for the patterns this repository uses: a pattern matches the path
// or one of its parent directories; a leading **/ matches at any depth.
func ignored(rel string, patterns []string) bool {
	rel = filepath.ToSlash(rel)
	parts := strings.Split(rel, "/")
	for _, p := range patterns {
		anyDepth := strings.HasPrefix(p, "**/")
		p = strings.TrimPrefix(p, "**/")
		for i := range parts {
			if anyDepth {
				if ok, _ := path.Match(p, strings.Join(parts[i:], "/")); ok {
					return true
				}
			}
			if ok, _ := path.Match(p, strings.Join(parts[:i+1], "/")); ok {
				return true
			}
		}
	}
	return false
}

// repositoryFiles lists the files of the working tree (tracked and untracked, not git-ignored).
func repositoryFiles() ([]string, error) {
	out, err := exec.Command("git", "-C", repoRoot, "ls-files", "--cached", "--others", "--exclude-standard").Output()
	if err == nil {
		var files []string
		for _, f := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if _, statErr := os.Stat(filepath.Join(repoRoot, f)); f != "" && statErr == nil {
				files = append(files, f)
			}
		}
		return files, nil
	}
	var files []string // no git: walk the tree
	err = filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(repoRoot, p)
			files = append(files, rel)
		}
		return nil
	})
	return files, err
}

func copyFile(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}
