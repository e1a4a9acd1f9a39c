"""Human units, table cells, terminal tables, and CSV/JSON/Parquet export."""
