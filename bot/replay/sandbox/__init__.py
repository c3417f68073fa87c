"""The sandbox: where an agent under replay runs, cut off from the harness.

The isolation backends (bwrap, docker), the trial's throwaway copy of the fixture and its baseline
commit, the one long-lived sandbox per trial and the executor inside it, the processes and what
``/proc`` says of them, the network bridge and scenario services, the toolchains, and the
harness's own tools and git.
"""
