# Prints S3 requests as botocore signs them at a fixed time: the vectors pasted into
# tests/unit/sigv4_test.cpp ("S3 rules"). Run: python3 tests/unit/sigv4_s3_vectors.py
import datetime, json
from unittest import mock
import boto3, botocore
from botocore.config import Config
from botocore.awsrequest import AWSResponse

FIXED = datetime.datetime(2026, 1, 2, 3, 4, 5)
captured = []

def before_send(request, **kw):
    from urllib.parse import urlsplit
    u = urlsplit(request.url)
    body = request.body
    if hasattr(body, 'read'):
        body = body.read()
    if isinstance(body, str): body = body.encode()
    captured.append(dict(method=request.method, path=u.path, query=u.query,
                         headers=[(k, v.decode() if isinstance(v, bytes) else v) for k, v in request.headers.items()],
                         body=(body or b'').decode('latin1')))
    class Raw:
        def stream(self, **kw): return iter([b''])
    return AWSResponse(request.url, 200, {}, Raw())

def client(key, secret, token=None, **cfg):
    c = boto3.client('s3', endpoint_url='http://127.0.0.1:9000', region_name='us-east-1',
                     aws_access_key_id=key, aws_secret_access_key=secret, aws_session_token=token,
                     config=Config(s3={'addressing_style': 'path', **cfg}, signature_version='s3v4'))
    c.meta.events.register('before-send', before_send)
    return c

with mock.patch('botocore.auth.get_current_datetime', return_value=FIXED):
    c = client('AKIATRAINYARD0000001', 'trainyardSecretKey/abc+def0123456789XYZ')
    c.put_object(Bucket='bkt', Key='dir/a b+c=d.txt', Body=b'hello')
    c.get_object(Bucket='bkt', Key='ünï/cödé ✓.txt')
    c.get_object(Bucket='bkt', Key='a//b/../c/./d')
    c.list_objects_v2(Bucket='bkt', Prefix='a b/', Delimiter='/')
    u = client('AKIATRAINYARD0000001', 'trainyardSecretKey/abc+def0123456789XYZ', payload_signing_enabled=False)
    u.put_object(Bucket='bkt', Key='k', Body=b'unsigned body')
    s = client('ASIATRAINYARD0000002', 'sessionSecret/xyz', token='tok+en/==')
    url = s.generate_presigned_url('get_object', Params={'Bucket': 'bkt', 'Key': 'p q/ü+=.bin'}, ExpiresIn=900)
    from urllib.parse import urlsplit
    uu = urlsplit(url)
    captured.append(dict(method='GET', path=uu.path, query=uu.query, headers=[('host', uu.netloc)], body=''))
print(json.dumps(captured, indent=1, ensure_ascii=False))
