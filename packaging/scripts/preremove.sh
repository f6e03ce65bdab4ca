#!/bin/sh
# The cairn package's preremove (deb: prerm remove|upgrade|...; rpm: %preun
# 0 on erase, 1 on upgrade). On removal it disables and stops the service
# (a clean stop: the node unmounts and closes its stores). An upgrade
# leaves the running node alone: it is restarted by hand, one node of a
# cluster at a time.
set -e

case "$1" in
remove | 0) ;;
*) exit 0 ;;
esac

if command -v systemctl >/dev/null 2>&1; then
	systemctl --no-reload disable cairn.service >/dev/null 2>&1 || true
	if [ -d /run/systemd/system ]; then
		systemctl stop cairn.service || true
	fi
fi
