"""ScoreRequests from what callers have: a message, its proto3 JSON (dict or
string), or numpy arrays; and scores back as numpy."""

import numpy as np
from google.protobuf import json_format
from google.protobuf import message as _message

from rankd_client._stubs import ranking_pb2

_INT64_MAX = np.iinfo(np.int64).max
_INT32_MAX = np.iinfo(np.int32).max


def to_score_request(request):
    """A ScoreRequest from a message, a proto3 JSON dict (lowerCamel or
    snake_case names), or a JSON string (a line of a .jsonl request file)."""
    if isinstance(request, ranking_pb2.ScoreRequest):
        return request
    if (isinstance(request, _message.Message)
            and request.DESCRIPTOR.full_name == "rankd.v1.ScoreRequest"):
        # The same message from another copy of the stubs (e.g. a user's own).
        return ranking_pb2.ScoreRequest.FromString(request.SerializeToString())
    try:
        if isinstance(request, (str, bytes)):
            return json_format.Parse(request, ranking_pb2.ScoreRequest())
        if isinstance(request, dict):
            return json_format.ParseDict(request, ranking_pb2.ScoreRequest())
    except json_format.ParseError as e:
        raise ValueError("not a ScoreRequest in proto3 JSON: %s" % e) from e
    raise TypeError("request: want a rankd.v1.ScoreRequest, a dict or a JSON string, got %s"
                    % type(request).__name__)


def with_version_label(request, version_label):
    """`request` with version_label set (a copy; the caller's is left alone).

    A request that names a version, or another label, conflicts: ValueError
    rather than silently one or the other (as rankctl score --version_label).
    """
    if not version_label:
        return request
    if request.version != 0:
        raise ValueError("version_label=%r, but the request names version %d"
                         % (version_label, request.version))
    if request.version_label and request.version_label != version_label:
        raise ValueError("version_label=%r, but the request names version_label %r"
                         % (version_label, request.version_label))
    labelled = ranking_pb2.ScoreRequest()
    labelled.CopyFrom(request)
    labelled.version_label = version_label
    return labelled


def _array(name, value):
    try:
        return np.asarray(value)
    except (TypeError, ValueError) as e:
        raise ValueError("%s: not an array: %s" % (name, e)) from e


def _int_vector(name, value, max_value):
    """A 1-D integer array as int64, within [0 or min, max_value]."""
    a = _array(name, value)
    if a.size == 0 and a.ndim <= 1:
        return np.zeros(0, np.int64)
    if a.ndim != 1 or not np.issubdtype(a.dtype, np.integer):
        raise ValueError("%s: want a 1-D integer array, got %s of shape %s"
                         % (name, a.dtype, list(a.shape)))
    if a.dtype == np.uint64 and a.max() > _INT64_MAX:
        raise ValueError("%s: %d does not fit int64" % (name, a.max()))
    a = a.astype(np.int64, copy=False)
    if max_value is not None and (a.min() < 0 or a.max() > max_value):
        bad = a.min() if a.min() < 0 else a.max()
        raise ValueError("%s: %d is out of range [0, %d]" % (name, bad, max_value))
    return a


def _float_vector(name, value, count):
    a = _array(name, value)
    if a.ndim != 1 or not (np.issubdtype(a.dtype, np.floating) or a.size == 0):
        raise ValueError("%s: want a 1-D float array, got %s of shape %s"
                         % (name, a.dtype, list(a.shape)))
    if len(a) != count:
        raise ValueError("%s: want one weight per id (%d), got %d" % (name, count, len(a)))
    return a.astype(np.float32, copy=False)


def build_score_request(model, dense, sparse=None, weights=None, version=0, version_label=""):
    """A rankd.v1.ScoreRequest from numpy arrays.

    Args:
      model: the model's name.
      dense: float array [candidates, num_dense] (float32; float64 and
        float16 are converted); its first dimension is the number of
        candidates B.
      sparse: {feature name: (ids, lengths)} or (ids, lengths, weights):
        ids int [total ids] (the bags concatenated), lengths int [B] (one
        bag per candidate) or [1] (one bag shared by all candidates),
        weights float [total ids] (weighted pooling).
      weights: {feature name: float [total ids]}, instead of the 3-tuples.
      version: 0 = the newest ready version; version_label: e.g. "stable".

    ValueError naming the argument (and feature) for a wrong shape, dtype
    or count.
    """
    if not isinstance(model, str) or not model:
        raise ValueError("model: want a model name, got %r" % (model,))
    if version and version_label:
        raise ValueError("give version or version_label, not both")
    d = _array("dense", dense)
    if d.ndim != 2:
        raise ValueError("dense: want a 2-D array [candidates, num_dense], got shape %s"
                         % list(d.shape))
    if not np.issubdtype(d.dtype, np.floating):
        raise ValueError("dense: want a float array (float32), got %s (convert with "
                         ".astype(np.float32))" % d.dtype)
    b = d.shape[0]
    if b < 1:
        raise ValueError("dense: no candidates (shape %s)" % list(d.shape))
    request = ranking_pb2.ScoreRequest(model=model, version=version, num_candidates=b,
                                       version_label=version_label or "")
    request.dense.extend(d.astype(np.float32, copy=False).ravel().tolist())
    sparse = {} if sparse is None else sparse
    weights = {} if weights is None else weights
    if not hasattr(sparse, "items"):
        raise ValueError("sparse: want a dict {feature name: (ids, lengths)}, got %s"
                         % type(sparse).__name__)
    if not hasattr(weights, "items"):
        raise ValueError("weights: want a dict {feature name: weights}, got %s"
                         % type(weights).__name__)
    for name in weights:
        if name not in sparse:
            raise ValueError("weights[%r]: no such feature in sparse" % (name,))
    for name, bag in sparse.items():
        where = "sparse[%r]" % (name,)
        if not isinstance(name, str) or not name:
            raise ValueError("sparse: feature names must be non-empty strings, got %r" % (name,))
        if not isinstance(bag, tuple) or len(bag) not in (2, 3):
            raise ValueError("%s: want a tuple (ids, lengths) or (ids, lengths, weights), got %s"
                             % (where, type(bag).__name__))
        ids = _int_vector(where + " ids", bag[0], None)
        lengths = _int_vector(where + " lengths", bag[1], _INT32_MAX)
        if len(lengths) not in (b, 1):
            raise ValueError("%s lengths: want %d entries (one bag per candidate) or 1 (one bag "
                             "shared by all), got %d" % (where, b, len(lengths)))
        total = int(lengths.sum())
        if total != len(ids):
            raise ValueError("%s: lengths add up to %d, but there are %d ids"
                             % (where, total, len(ids)))
        feature = request.sparse.add(name=name)
        feature.ids.extend(ids.tolist())
        feature.lengths.extend(lengths.tolist())
        w = bag[2] if len(bag) == 3 else None
        if name in weights:
            if w is not None:
                raise ValueError("%s: weights given twice (in the tuple and in weights=)" % where)
            w = weights[name]
        if w is not None:
            feature.weights.extend(_float_vector(where + " weights", w, len(ids)).tolist())
    return request


def scores_array(response, num_candidates=None):
    """The scores of a ScoreResponse as a float32 numpy array (bit for bit
    the server's float32 values)."""
    scores = np.asarray(response.scores, dtype=np.float32)
    if num_candidates is not None and len(scores) != num_candidates:
        raise ValueError("the server answered %d scores for %d candidates"
                         % (len(scores), num_candidates))
    return scores


def prepare_score(request, dense, sparse, weights, version, version_label):
    """The ScoreRequest of a score() call and, for the numpy form (dense
    given), its number of candidates (None for the request form)."""
    if dense is None:
        if sparse is not None or weights is not None or version:
            raise ValueError("sparse / weights / version: only with dense (the numpy form: "
                             "score(model, dense, sparse=...)); a request carries its own")
        return with_version_label(to_score_request(request), version_label), None
    if not isinstance(request, str):
        raise TypeError("score(model, dense, ...): the first argument must be the model's "
                        "name with dense given, got %s (pass timeout_s= by keyword)"
                        % type(request).__name__)
    built = build_score_request(request, dense, sparse, weights, version, version_label)
    return built, built.num_candidates
