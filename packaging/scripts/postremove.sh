#!/bin/sh
# The cairn package's postremove (deb: postrm remove|purge|upgrade|...;
# rpm: %postun 0 on erase, 1 on upgrade). It never deletes the data:
# /var/lib/cairn (volumes, namespace, admin.key) and the cairn user stay,
# even on purge. A purge deletes the logs in /var/log/cairn.
set -e

case "$1" in
remove | 0)
	if [ -d /run/systemd/system ]; then
		systemctl daemon-reload >/dev/null 2>&1 || true
	fi
	;;
purge)
	rm -rf /var/log/cairn
	if [ -d /var/lib/cairn ]; then
		echo "cairn: purged. The data in /var/lib/cairn (and the admin key there) and the cairn user are kept;"
		echo "cairn: delete them by hand if the data is no longer wanted: rm -rf /var/lib/cairn; deluser cairn"
	fi
	;;
esac
