-- -*- lua -*-
-- Stand-in "compiler" module of the hpclaunch dev cluster: it only sets a marker variable
-- (the system gcc stays what it is).
help([[Stand-in gcc/12 module for hpclaunch tests: sets HPCLAUNCH_DEV_GCC=12.]])
whatis("Name: gcc")
whatis("Version: 12")
family("compiler")
setenv("HPCLAUNCH_DEV_GCC", "12")
