"""memlane's sans-IO core: entries, canonical encoding, signatures, kinds, clocks, time text."""
