"""The static site: ``build_site(out_dir)`` writes the matrix of every op in every
release, a page per op, per release and per release diff, and the machine-readable
export the pages read (``export.py`` documents its schema). Pure HTML, CSS and vanilla
JavaScript; it works from ``file://`` and from any static host."""
from opregistry.site.build import SiteSummary, build_site, site_target

__all__ = ["SiteSummary", "build_site", "site_target"]
