"""One module per tab of the app; each lays out its tab inside `build_demo`."""
