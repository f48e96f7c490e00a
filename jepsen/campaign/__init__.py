"""The parts of the network-namespace campaign that jepsen/run puts together."""
