#!/bin/sh
# The cairn package's postinstall (deb: postinst configure [OLD-VERSION];
# rpm: %post 1 on install, 2 on upgrade). It makes the cairn system user
# and group, /var/lib/cairn and /var/log/cairn (cairn:cairn, 0750) and an
# admin key when none exists, and says what to do next. It never enables
# or starts the service, and never changes what is already there.
set -e

case "$1" in
configure) if [ -z "$2" ]; then first=1; else first=; fi ;; # deb: $2 is the version upgraded from
1) first=1 ;;                                              # rpm: install
2) first= ;;                                               # rpm: upgrade
*) exit 0 ;;                                               # deb: abort-*
esac

nologin=/usr/sbin/nologin
[ -x "$nologin" ] || nologin=/sbin/nologin
if ! getent passwd cairn >/dev/null; then
	if [ "$1" = configure ]; then
		adduser --quiet --system --group --home /var/lib/cairn --no-create-home \
			--shell "$nologin" --gecos "Cairn file store" cairn
	else
		getent group cairn >/dev/null || groupadd --system cairn
		useradd --system --gid cairn --home-dir /var/lib/cairn --no-create-home \
			--shell "$nologin" --comment "Cairn file store" cairn
	fi
fi

for d in /var/lib/cairn /var/log/cairn; do
	if [ ! -e "$d" ]; then
		install -d -o cairn -g cairn -m 0750 "$d"
	elif [ "$(stat -c %U "$d")" != cairn ]; then
		echo "cairn: warning: $d exists and is not owned by the cairn user, which the service runs as;" >&2
		echo "cairn: left as it is. If it is this node's, hand it over with: chown -R cairn:cairn $d" >&2
	fi
done

key=/var/lib/cairn/admin.key
made_key=
if [ ! -e "$key" ]; then
	# As `cairn server` makes one when it finds none: 24 random bytes, hex.
	(
		umask 077
		od -An -tx1 -N24 /dev/urandom | tr -d ' \n' >"$key.tmp"
		echo >>"$key.tmp"
	)
	chown cairn:cairn "$key.tmp"
	chmod 0600 "$key.tmp"
	mv "$key.tmp" "$key"
	made_key=1
fi

if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi

if [ -z "$first" ]; then
	if [ -d /run/systemd/system ] && systemctl is-active --quiet cairn.service; then
		echo "cairn: upgraded. The running node goes on with the old binary until it is restarted:"
		echo "cairn:   systemctl restart cairn    (in a cluster, one node at a time: docs/operations.md, \"Upgrades\")"
	fi
	exit 0
fi

cat <<MSG
cairn: installed. Nothing runs yet: the service is neither enabled nor started.
  settings   /etc/cairn/cairn.toml (man cairn-server lists them all)
  data       /var/lib/cairn, owned by the cairn user (kept when the package is removed or purged)
MSG
if [ -n "$made_key" ]; then
	echo "  admin key  $key (made now, readable by root and cairn only; cat it to use it)"
else
	echo "  admin key  $key (already there, kept)"
fi
cat <<'MSG'
  logs       journalctl -u cairn; the access log in /var/log/cairn
A single node: start it, then check it answers:
  systemctl enable --now cairn
  curl http://127.0.0.1:8080/_cairn/health
A cluster: every node needs the same cluster secret and admin key. Make the
secret once, on one node:
  (umask 027 && head -c 32 /dev/urandom | base64 > /etc/cairn/cluster.secret) && chgrp cairn /etc/cairn/cluster.secret
copy /etc/cairn/cluster.secret and /var/lib/cairn/admin.key to the same paths
on the other nodes (same owners and modes: scp -p, then chgrp / chown), set in
/etc/cairn/cairn.toml on every node
  secret-file = "/etc/cairn/cluster.secret"
  listen = "0.0.0.0:8080" and advertise = "http://THIS-NODE:8080"
and on every node but the first
  join = "http://FIRST-NODE:8080"
then start the first node, and the others: systemctl enable --now cairn
MSG
