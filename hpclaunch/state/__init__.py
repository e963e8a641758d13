"""Every file a job writes and a reader reads back: the run-directory contract (runfiles), the job
registry, the suspect-node list, the start-up timeline, the recoveries inside an allocation, the stragglers
named from the progress records, provenance.json, export-run archives.

May import: core, errors. Written by the login side and by the job; read by both."""
