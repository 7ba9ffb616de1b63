"""The c10d backend name, in a leaf module: the registration, the process groups' identity, the
flight-recorder and monitored-barrier adapters all read it without importing each other."""
from __future__ import annotations

BACKEND_NAME = "neuron"
