"""`edgegaze deploy`: a profile as a self-contained bundle for an edge box (pipeline/deploy.py)."""

from __future__ import annotations

from pipeline.arguments import add_param_option


def add(sub) -> None:
    p = sub.add_parser("deploy", help="bundle a profile with every file its pipeline runs, for "
                       "`edgegaze run --bundle` on a runtime-only install (no zoo, no network)")
    p.add_argument("--profile", required=True, help="profile.toml from `edgegaze optimize pipeline`")
    p.add_argument("--out", required=True, help="bundle folder (replaced whole if it is a bundle), or NAME.tar.gz")
    p.add_argument("--calibration", metavar="FILE", help="a gaze calibration JSON to ship with it (`edgegaze mouse`)")
    p.add_argument("--archive", action="store_true", help="write one .tar.gz (--out with .tar.gz added)")
    p.add_argument("--no-blobs", dest="blobs", action="store_false", help="leave out OpenVINO's compiled blobs "
                   "(made for this CPU and OpenVINO build; they cut the first start there)")
    add_param_option(p)
    p.set_defaults(func=_deploy)


def _deploy(args) -> int:
    from pipeline.deploy import deploy

    deploy(args.profile, args.out, calibration=args.calibration, archive=args.archive, blobs=args.blobs,
           params=args.params)
    return 0
