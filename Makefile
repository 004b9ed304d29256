# svcd — build, test and package. `make test` and `make demo` run the idempotent `make setup` first.
SHELL := /bin/bash
DENO := $(CURDIR)/node_modules/.bin/deno
export NO_COLOR := 1
export DENO_NO_UPDATE_CHECK := 1

# Debian packages the daemon, its tests and its demo need.
APT_PACKAGES := softhsm2 opensc libssl-dev libnss3-dev gcc make nginx-light openssl util-linux curl systemd gnutls-bin python3-cryptography python3-cryptography-vectors e2fsprogs p11-kit p11-kit-modules libp11-kit-dev libcurl4-openssl-dev libjson-c-dev libengine-pkcs11-openssl osslsigncode openssh-client rsyslog prometheus man-db groff-base

.PHONY: setup check test test-other-release demo bench binary deb clean module fuzz man

setup:
	@bash packaging/setup-host.sh $(APT_PACKAGES)
	@# Not `npm ci`: the deno package lists optional binaries for other platforms that the registry
	@# reachable here does not carry, so npm ci calls the lock out of sync. `npm install --no-save`
	@# installs exactly the locked versions and never rewrites package-lock.json.
	@echo "setup: npm install --no-save (Deno 2.9.6 and npm deps from package-lock.json)"
	@npm install --no-save --no-audit --no-fund --loglevel=error
	@echo "setup: deno install --frozen"; $(DENO) install --frozen --quiet
	@$(MAKE) --no-print-directory module
	@echo "setup: done ($$($(DENO) --version | head -1))"

# The test module (tests/module), the client module (pkcs11-module, libsvcd-pkcs11.so) and the
# limit server of the benches (bench/limit, svcd-limit).
module:
	@if [ -f tests/module/Makefile ]; then $(MAKE) --no-print-directory -C tests/module; fi
	@$(MAKE) --no-print-directory -C pkcs11-module
	@$(MAKE) --no-print-directory -C bench/limit

check:
	$(DENO) fmt --check
	$(DENO) lint
	@# --doc: the @example blocks are type-checked too (a fragment gets `declare const` lines and imports; `ts ignore` only where it cannot compile, with the reason in the fence).
	$(DENO) check --doc main.ts lib/ ffi/ tests/ bench/

# Both run the idempotent setup first, so on a fresh machine no other command is needed.
test: setup
	@bash tests/run.sh

# The whole suite on the other Debian release (12 <-> 13) in a debootstrap chroot, for developers
# before they stop (root; RELEASE=bookworm|trixie, KEEP=1 keeps the chroot for the next run).
test-other-release:
	@bash tests/other_release.sh

demo: setup
	@bash packaging/demo.sh

bench:
	$(DENO) run -A bench/raw-sign.ts

# The fuzz campaign (tests/fuzz/): N generated requests against a fresh daemon with an independent
# oracle, then the policy, index.txt, DER and OCSP request parsers; findings go to build/fuzz-findings/.
# MINUTES=M stops it at a time limit (whichever comes first). CI runs a slice.
N ?= 10000
SEED ?= 1
fuzz:
	$(DENO) run -A tests/fuzz/main.ts --cases $(N) --seed $(SEED) $(if $(MINUTES),--minutes $(MINUTES))

# `deno compile` needs a denort base that no registry here carries (see packaging/build-binary.sh).
binary:
	@bash packaging/build-binary.sh

deb:
	@bash packaging/build-deb.sh

# svcd(8) and svcd-GROUP(8) into build/man, and the options of svcd serve in docs/operations.md,
# from the option tables --help prints.
man:
	$(DENO) run --allow-read --allow-write packaging/man.ts build/man
	$(DENO) run --allow-read --allow-write packaging/man.ts --docs docs/operations.md

clean:
	rm -rf build .demo
	@if [ -f tests/module/Makefile ]; then $(MAKE) -C tests/module clean; fi
	$(MAKE) -C pkcs11-module clean
	$(MAKE) -C bench/limit clean
