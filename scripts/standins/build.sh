#!/usr/bin/env bash
# Test-only: builds local stand-ins for the images docker-compose.yml pulls (golang, distroless,
# postgres, rabbitmq, pgbouncer) from Debian packages, because CI machines have a Docker Engine but no image
# registry. Users pull the real images; nothing here ships.
#
#   bash scripts/standins/build.sh        # prints the variables that point docker-compose.yml at them
#
# A minimal bookworm root (debootstrap, from the Debian mirror apt on this machine uses) is imported
# as keelson-standin/bookworm; PostgreSQL 15, RabbitMQ 3.10 and PgBouncer 1.18 are installed into copies of it with
# apt-get in a chroot; the Go stage gets this machine's GOROOT. Images are tagged with a hash of
# these scripts and the Go version, so a second run on one machine reuses them. Each image is also
# saved as a tarball under KEELSON_STANDIN_CACHE (/var/tmp/keelson-standins-cache): after
# `docker system prune -a` they are loaded in seconds instead of built again. From nothing it
# takes a few minutes, most of them debootstrap and apt downloads.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export DEBIAN_FRONTEND=noninteractive LC_ALL=C

need() { command -v "$1" >/dev/null || { echo "standins: $1 is missing (apt-get install $2)" >&2; exit 1; }; }
need docker docker.io
need go golang
if ! command -v debootstrap >/dev/null; then
	command -v apt-get >/dev/null || { echo "standins: debootstrap is missing" >&2; exit 1; }
	apt-get install -y -q -o DPkg::Lock::Timeout=600 debootstrap >/dev/null ||
		{ apt-get update -q -o DPkg::Lock::Timeout=600 >/dev/null && apt-get install -y -q -o DPkg::Lock::Timeout=600 debootstrap >/dev/null; }
fi

goroot="$(go env GOROOT)"
goversion="$(go env GOVERSION)"
# Bump when a change here alters what an image contains; an image's own folder is hashed anyway.
recipe=1
key_of() { # $1: image name; the tag a build with today's recipe gets
	(echo "$recipe"; cat "$here/$1"/*; if [ "$1" = go ]; then echo "$goversion slim"; fi) | sha256sum | cut -c1-12
}

# The Debian mirror and security mirror apt already uses here (deb822 or one-line sources).
mirror_of() { # $1: regex the URI must match, $2: regex it must not
	grep -hsE '^(URIs:|deb )' /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources |
		grep -oE 'https?://[^ ]+' | grep -E "$1" | grep -vE "$2" | head -n1 || true
}
mirror="$(mirror_of '/debian/?$' 'security')"; mirror="${mirror:-http://deb.debian.org/debian}"
security="$(mirror_of 'debian-security/?$' '^$')"; security="${security:-http://deb.debian.org/debian-security}"

work="$(mktemp -d /var/tmp/keelson-standins.XXXXXX)"
cleanup() {
	for m in "$work"/*/proc; do mountpoint -q "$m" 2>/dev/null && umount -l "$m"; done
	rm -rf "$work"
}
trap cleanup EXIT

have() { docker image inspect "$1" >/dev/null 2>&1; }
log() { echo "standins: $*" >&2; }

cache="${KEELSON_STANDIN_CACHE:-/var/tmp/keelson-standins-cache}"
mkdir -p "$cache"
# Two runs at once would build and save the same images side by side: the second waits, then finds them.
if command -v flock >/dev/null; then exec 9>"$cache/.lock" && flock 9; fi
# cached IMAGE: load IMAGE from its tarball when the image store lost it (and save it when only the
# store has it); false when neither has it.
cached() {
	local tarball="$cache/${1//[\/:]/_}.tar"
	if have "$1"; then
		[ -s "$tarball" ] || keep "$1"
		return 0
	fi
	[ -s "$tarball" ] && docker load -q -i "$tarball" >/dev/null && have "$1"
}
# keep IMAGE: save IMAGE into the cache, replacing older builds of the same name.
keep() {
	local name="${1//[\/:]/_}"
	rm -f "$cache/${name%_*}"_*.tar
	docker save -o "$cache/$name.tar.partial" "$1" && mv "$cache/$name.tar.partial" "$cache/$name.tar"
}

# base_root DIR: the minbase root, from the cached image or from debootstrap.
base_root() {
	local dir="$1" img="keelson-standin/bookworm:recipe$recipe"
	mkdir -p "$dir"
	if cached "$img"; then
		local cid; cid="$(docker create "$img" /bin/true)"
		docker export "$cid" | tar -C "$dir" -x
		docker rm "$cid" >/dev/null
		return
	fi
	log "debootstrap bookworm from $mirror"
	debootstrap --variant=minbase bookworm "$dir" "$mirror" >"$work/debootstrap.log" 2>&1 ||
		{ tail -n 20 "$work/debootstrap.log" >&2; exit 1; }
	cat >"$dir/etc/apt/sources.list" <<-SOURCES
		deb $mirror bookworm main
		deb $mirror bookworm-updates main
		deb $security bookworm-security main
	SOURCES
	# Services installed in the chroot must not start there.
	printf '#!/bin/sh\nexit 101\n' >"$dir/usr/sbin/policy-rc.d"; chmod 755 "$dir/usr/sbin/policy-rc.d"
	rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
	tar -C "$dir" -c . | docker import --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' - "$img" >/dev/null
	docker tag "$img" keelson-standin/bookworm:latest
	keep "$img"
}

# install_into DIR PACKAGES...: apt-get install in a chroot, then drop the caches.
install_into() {
	local dir="$1"; shift
	cp /etc/resolv.conf "$dir/etc/resolv.conf"
	mount -t proc proc "$dir/proc"
	chroot "$dir" apt-get update -q >/dev/null
	# No fsync per unpacked file: the root is thrown away if anything fails.
	echo force-unsafe-io >"$dir/etc/dpkg/dpkg.cfg.d/unsafe-io"
	chroot "$dir" apt-get install -y -q --no-install-recommends "$@"
	rm "$dir/etc/dpkg/dpkg.cfg.d/unsafe-io"
	chroot "$dir" apt-get clean
	umount -l "$dir/proc"
	rm -rf "$dir"/var/lib/apt/lists/* "$dir"/usr/share/doc/* "$dir"/usr/share/man/*
	: >"$dir/etc/resolv.conf"
}

# image NAME ROOTDIR: import ROOTDIR and build scripts/standins/NAME/Dockerfile on top of it.
image() {
	local name="$1" dir="$2" key; key="$(key_of "$1")"; local root="keelson-standin/$1-root:$key"
	tar -C "$dir" -c . | docker import --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' - "$root" >/dev/null
	docker build -q --build-arg ROOT="$root" -t "keelson-standin/$name:$key" "$here/$name"
	docker rmi "$root" >/dev/null
	rm -rf "$dir"
}

# build NAME: one stand-in image, from a copy of the base root where it needs one.
build() {
	set -Eeuo pipefail # runs in a background subshell: stop it at the first error, and say where
	trap 'echo "standins: $name: line $LINENO: $BASH_COMMAND failed" >&2' ERR
	local name="$1" dir="$work/$1"
	case "$name" in
	go)
		# Only what `go build` and the Dockerfile's `RUN` lines need: a shell and GOROOT without its
		# tests. The legacy builder compares every file of the image after each build step, so
		# each file less makes every step of the app's image build faster.
		mkdir -p "$dir/bin" "$dir/tmp" "$dir/root" "$dir/usr/local/go"
		chmod 1777 "$dir/tmp"
		cp -L /bin/sh "$dir/bin/sh"
		for lib in $(ldd /bin/sh | grep -oE '/[^ ]+'); do
			mkdir -p "$dir$(dirname "$lib")"; cp -L "$lib" "$dir$lib"
		done
		tar -C "$goroot" --exclude=./test --exclude=testdata --exclude='*_test.go' -c . | tar -C "$dir/usr/local/go" -x
		;;
	runtime) # like distroless static: no shell, no package manager, a nonroot user 65532
		mkdir -p "$dir/etc/ssl/certs" "$dir/tmp" "$dir/home/nonroot"
		chmod 1777 "$dir/tmp"; chown 65532:65532 "$dir/home/nonroot"
		printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$dir/etc/passwd"
		printf 'root:x:0:\nnonroot:x:65532:\n' >"$dir/etc/group"
		if [ -f /etc/ssl/certs/ca-certificates.crt ]; then cp /etc/ssl/certs/ca-certificates.crt "$dir/etc/ssl/certs/"; fi
		;;
	postgres)
		cp -a "$work/base" "$dir"
		# The entrypoint creates the cluster in PGDATA; the package's own would only cost an initdb.
		mkdir -p "$dir/etc/postgresql-common/createcluster.d"
		echo "create_main_cluster = false" >"$dir/etc/postgresql-common/createcluster.d/no-main.conf"
		install_into "$dir" postgresql-15
		;;
	rabbitmq)
		cp -a "$work/base" "$dir"
		install_into "$dir" rabbitmq-server
		echo '[rabbitmq_management].' >"$dir/etc/rabbitmq/enabled_plugins"
		mkdir -p "$dir/etc/rabbitmq/conf.d"
		;;
	pgbouncer)
		cp -a "$work/base" "$dir"
		install_into "$dir" pgbouncer
		;;
	esac
	image "$name" "$dir"
	docker tag "keelson-standin/$name:$(key_of "$name")" "keelson-standin/$name:latest"
	keep "keelson-standin/$name:$(key_of "$name")"
}

start=$SECONDS
missing=()
for name in go runtime postgres rabbitmq pgbouncer; do
	if cached "keelson-standin/$name:$(key_of "$name")"; then
		docker tag "keelson-standin/$name:$(key_of "$name")" "keelson-standin/$name:latest"
	else
		missing+=("$name")
	fi
done
if [ "${#missing[@]}" -gt 0 ]; then
	log "building ${missing[*]}"
	case " ${missing[*]} " in *" postgres "* | *" rabbitmq "* | *" pgbouncer "*) base_root "$work/base" ;; esac
	# The images are independent: build them side by side (downloads and unpacking overlap).
	pids=()
	for name in "${missing[@]}"; do
		build "$name" >"$work/$name.log" 2>&1 &
		pids+=("$!")
	done
	failed=0
	for i in "${!pids[@]}"; do
		if ! wait "${pids[$i]}"; then
			echo "standins: ${missing[$i]} failed:" >&2
			tail -n 30 "$work/${missing[$i]}.log" >&2
			failed=1
		fi
	done
	[ "$failed" = 0 ] || exit 1
fi
log "stand-ins ready in $((SECONDS - start)) s"

# What docker-compose.yml needs to build and run on them, offline.
cat <<VARS
GO_IMAGE=keelson-standin/go:$(key_of go)
RUNTIME_IMAGE=keelson-standin/runtime:$(key_of runtime)
POSTGRES_IMAGE=keelson-standin/postgres:$(key_of postgres)
RABBITMQ_IMAGE=keelson-standin/rabbitmq:$(key_of rabbitmq)
PGBOUNCER_IMAGE=keelson-standin/pgbouncer:$(key_of pgbouncer)
VARS
