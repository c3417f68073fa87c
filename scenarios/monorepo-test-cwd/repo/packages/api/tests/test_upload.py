from api.upload import MAX_UPLOAD_BYTES, check_upload


def test_rejects_oversized_uploads():
    assert check_upload("big", MAX_UPLOAD_BYTES + 1, now=0)[0] == 413


def test_accepts_a_normal_upload():
    assert check_upload("small", 1024, now=0) == (202, "accepted")
