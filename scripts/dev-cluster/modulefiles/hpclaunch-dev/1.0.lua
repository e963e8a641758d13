-- -*- lua -*-
-- Test module of the hpclaunch dev cluster.
help([[hpclaunch dev-cluster test module: sets HPCLAUNCH_DEV_MODULE=1.0 and adds a harmless
directory (with the script hpclaunch-dev-hello) to the front of PATH.]])
whatis("Name: hpclaunch-dev")
whatis("Version: 1.0")
setenv("HPCLAUNCH_DEV_MODULE", "1.0")
prepend_path("PATH", "/opt/hpclaunch-dev/bin")
