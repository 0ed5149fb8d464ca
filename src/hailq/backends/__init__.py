"""Storage backends behind one seam (``base.Backend``)."""
