"""trajkit."""


def version() -> str:
    """The installed distribution's version ("dev" when running from a source tree without metadata)."""
    from importlib.metadata import PackageNotFoundError, version as dist_version

    try:
        return dist_version("trajkit")
    except PackageNotFoundError:
        return "dev"
