"""The seg probe (word segmentation from attention): the probe (probe), its units and gold
boundaries (units), the scores of many segmenters at once (scoring), and reading a result (show)."""
