"""VM hosts for the lab: a Debian image built from Debian packages, qemu VMs whose fabric
NICs are taps on the lab's switches, and the inventory that reaches them over ssh."""
